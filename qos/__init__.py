"""QoS policies as immutable values."""
