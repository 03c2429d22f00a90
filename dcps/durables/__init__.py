"""Durables, queues and key-value maps in the store (seeds 001 and 002).

Placeholder until helper N's package root lands: import :class:`KeyValueMap`
from ``dcps.durables._map`` and the queue classes from ``dcps.durables._queue``.
"""
