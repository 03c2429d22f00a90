"""Channel clients follow the dcps conventions: a state, ``closed``, and ``Timeout`` arguments."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from dcps import AlreadyClosedError, BadParameterError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, ClientState
from dcps.store import Store
from tests.support.peers.channels_types import Msg

TIMEOUT = 10.0


@pytest.fixture
def kw(store: Store, domain_id: int) -> dict[str, Any]:
    return {"domain_id": domain_id, "namespace": store.namespace}


class TestLifecycle:
    def test_publisher_state_and_closed(self, kw: dict[str, Any], topic_name: str) -> None:
        """A publisher is OPEN until closed, then CLOSED; publishing after close raises."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with ChannelPublisher(topic, **kw) as pub:  # type: ignore[var-annotated]
            assert pub.state is ClientState.OPEN
            assert not pub.closed
            pub.publish(Msg(1, 1)).result(TIMEOUT)
        assert pub.state is ClientState.CLOSED
        assert pub.closed
        with pytest.raises(AlreadyClosedError, match=topic_name):
            pub.publish(Msg(1, 2))
        pub.close()  # idempotent

    def test_subscriber_state_and_closed(self, kw: dict[str, Any], topic_name: str) -> None:
        """A subscriber is OPEN until its ``with`` block ends, then CLOSED and refuses use."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with ChannelSubscriber(topic, **kw) as sub:  # type: ignore[var-annotated]
            assert sub.state is ClientState.OPEN
            assert not sub.closed
        assert sub.state is ClientState.CLOSED
        assert sub.closed
        with pytest.raises(AlreadyClosedError):
            sub.receive()
        assert repr(ClientState.OPEN) == "<ClientState.OPEN: 'open'>"
        assert ClientState.__module__ == "dcps.channels"


class TestTimeouts:
    def test_seconds_and_timedelta_are_both_accepted(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        """Every channel timeout takes a timedelta or float seconds, with the same meaning."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with (
            ChannelPublisher(  # type: ignore[var-annotated]
                topic, linger=0.001, timeout=5, connect_timeout=5.0, **kw
            ) as pub,
            ChannelSubscriber(  # type: ignore[var-annotated]
                topic,
                timeout=5.0,
                connect_timeout=timedelta(seconds=5),
                request_timeout=5,
                complete_on_empty=True,
                **kw,
            ) as sub,
        ):
            pub.publish(Msg(1, 1))
            pub.flush(2.5)
            assert sub.flow_control.drain_backlog(1.0)
            got = sub.receive(10).result(TIMEOUT)
            while not got:
                got = sub.receive(10).result(TIMEOUT)
            assert [e.value for e in got] == [Msg(1, 1)]

    @pytest.mark.parametrize(
        ("make", "arg"),
        [
            (ChannelPublisher, "timeout"),
            (ChannelPublisher, "linger"),
            (ChannelSubscriber, "timeout"),
            (ChannelSubscriber, "request_timeout"),
        ],
    )
    def test_negative_timeouts_are_refused(
        self, kw: dict[str, Any], topic_name: str, make: Any, arg: str
    ) -> None:
        """A negative timeout raises BadParameterError naming the argument."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with pytest.raises(BadParameterError, match=arg):
            make(topic, **{arg: -1.0}, **kw)
        with pytest.raises(BadParameterError, match=arg):
            make(topic, **{arg: timedelta(seconds=-1)}, **kw)


class TestSharedParticipant:
    def test_clients_of_a_process_share_one_participant_and_close_alone(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        """Two publishers in one process use one DDS participant; closing one leaves the
        other publishing (each deletes only what it made)."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        first: ChannelPublisher[Msg] = ChannelPublisher(topic, **kw)
        with ChannelPublisher(topic, **kw) as second:  # type: ignore[var-annotated]
            assert first._connection.endpoint.participant is second._connection.endpoint.participant
            first.close()
            assert second.publish(Msg(1, 1)).result(TIMEOUT).offset >= 0

    def test_a_remote_client_connects_while_the_stores_process_churns_clients(
        self, kw: dict[str, Any], topic_name: str, tmp_path: Any
    ) -> None:
        """While the store's own process opens and closes clients all the time, a client in
        another process connects at once, 10 times out of 10 (with a participant per client,
        Cyclone ignored the other process's new participants for 20 s and more)."""
        import subprocess
        import sys
        import threading

        from dcps.channels._connect import Connection

        stop = threading.Event()

        def churn() -> None:
            while not stop.is_set():
                Connection(
                    kw["domain_id"], kw["namespace"], None, connect_timeout=30, request_timeout=10
                ).close()

        child = (
            "import sys, time\n"
            "from dcps.channels._connect import Connection\n"
            "for _ in range(10):\n"
            "    t = time.monotonic()\n"
            f"    Connection({kw['domain_id']}, {kw['namespace']!r}, None,"
            " connect_timeout=5, request_timeout=5).close()\n"
            "    print(round(time.monotonic() - t, 3), flush=True)\n"
        )
        thread = threading.Thread(target=churn, daemon=True)
        thread.start()
        try:
            result = subprocess.run(
                [sys.executable, "-c", child], capture_output=True, text=True, timeout=120
            )
        finally:
            stop.set()
            thread.join(30)
        assert result.returncode == 0, result.stderr[-2000:]
        assert len(result.stdout.split()) == 10
