"""The glue to Cyclone DDS's C library and Python binding.

``calls``: ctypes calls the binding lacks; ``binding``: the binding's private
members dcps uses (entity handles, XCDR2, listener swaps), all in one place;
``retcode``: return codes to dcps errors (the one place); ``qos_bridge``: dcps
QoS to Cyclone QoS; ``timing``: durations and timestamps in Cyclone's
nanoseconds; ``gather``: writing a serialised sample from pieces (no join).
Internal.
"""
