"""The store's wire protocol: message types, their codec, wire error codes.

The only thing the store (``dcps.store``) and its clients (``dcps.channels``,
``dcps.spark``) share. Internal: no public names.
"""
