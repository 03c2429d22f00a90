"""The store's wire protocol: the only thing the store (``dcps.store``) and its clients
(``dcps.channels``, ``dcps.spark``) share. Internal: no public names.

``_messages``
    The IDL structs (one per direction, plus live batches, assignments and
    store announcements) and their compiled codec; undecodable requests.
``_requests`` / ``_replies``
    Typed requests and answers: the one place that knows which struct field
    carries what (``to_wire`` / ``from_wire``); requests are validated whole.
``_codes``
    Explicit wire numbers: request kinds, seek modes, commit statuses, error codes.
``_limits``
    Bounds on one request (FETCH count, channels, element size, names, clients).
``_names``
    QoS and partition names of the protocol's topics.
``_transport``
    ``Endpoint`` (a participant with the protocol's topics) and ``Waiter``.
``_batches``
    Stored elements in bulk (``ElementRun``) as FETCH replies carry them.
"""
