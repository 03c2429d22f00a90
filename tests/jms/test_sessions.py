"""The TopicSession's rules (seed 004) on a real store: topics, subscribers, durables,
noLocal, temporary topics, publishers, acknowledgement modes and transactions."""

from __future__ import annotations

import threading

import pytest

from dcps import (
    AlreadyClosedError,
    DcpsError,
    IllegalOperationError,
    InvalidDestinationError,
    InvalidSelectorError,
    PreconditionNotMetError,
)
from dcps.jms import AcknowledgeMode, Message, TemporaryTopic, Topic, TopicSubscriber
from tests.jms.conftest import Connections
from tests.support.peers.jms_types import Quote
from tests.support.waiting import eventually

WAIT = 10.0


def bodies(sub: TopicSubscriber[Quote], quiet: float = 1.0) -> list[int]:
    """The seq of every message received until nothing comes for ``quiet`` seconds."""
    out = []
    while (m := sub.receive(quiet)) is not None:
        out.append(m.body.seq)
    return out


def quotes(n: int, symbol: str = "ABC", start: int = 0) -> list[Quote]:
    return [Quote(symbol, float(i), i) for i in range(start, start + n)]


class TestSession:
    def test_create_topic_is_an_identity_not_a_physical_topic(self, connect: Connections) -> None:
        """create_topic returns an equal identity each time and does not reach the store."""
        session = connect().create_topic_session()
        a = session.create_topic("prices", Quote)
        assert a == session.create_topic("prices", Quote) == Topic("prices", Quote)
        assert a.topic_name == "prices"
        with pytest.raises(InvalidDestinationError):
            session.create_topic("bad*name", Quote)

    @pytest.mark.parametrize("method", ["create_browser", "create_queue", "create_temporary_queue"])
    def test_point_to_point_methods_raise_illegal_state(
        self, connect: Connections, method: str
    ) -> None:
        """The queue methods of a topic session raise the illegal-state error."""
        session = connect().create_topic_session()
        with pytest.raises(IllegalOperationError):
            getattr(session, method)("q")

    def test_closed_session_refuses_use(self, connect: Connections) -> None:
        """A closed session raises AlreadyClosedError (JMS IllegalStateException)."""
        session = connect().create_topic_session()
        session.close()
        with pytest.raises(AlreadyClosedError):
            session.create_topic("x", Quote)

    def test_a_stopped_connection_delivers_nothing_until_started(
        self, connect: Connections, topic_name: str
    ) -> None:
        """Messages wait while the connection is stopped and come once it starts."""
        connection = connect(start=False)
        session = connection.create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_subscriber(topic)
        session.create_publisher(topic).publish(Quote("A", 1.0, 1))
        assert sub.receive(0.5) is None
        connection.start()
        message = sub.receive(WAIT)
        assert message is not None
        assert message.body.seq == 1


class TestNonDurable:
    def test_receives_only_what_is_published_while_active(
        self, connect: Connections, topic_name: str
    ) -> None:
        """Messages published before the subscriber exists, or after it closed, are not its."""
        session = connect().create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        pub = session.create_publisher(topic)
        keep = session.create_durable_subscriber  # noqa: F841 - (a durable keeps the topic's log)
        pub.publish(Quote("A", 0.0, 0))
        sub = session.create_subscriber(topic)
        for q in quotes(3, start=1):
            pub.publish(q)
        assert bodies(sub) == [1, 2, 3]
        sub.close()
        pub.publish(Quote("A", 9.0, 9))
        again = session.create_subscriber(topic)
        assert bodies(again, 0.5) == []

    def test_selector_drops_non_matching_messages_for_good(
        self, connect: Connections, topic_name: str
    ) -> None:
        """Non-matching messages are never delivered, not even after recover."""
        session = connect().create_topic_session(AcknowledgeMode.CLIENT)
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_subscriber(topic, "seq >= 5 AND symbol LIKE 'A%'")
        pub = session.create_publisher(topic)
        for i in range(10):
            pub.publish(Quote("ABC" if i % 2 else "XYZ", float(i), i))
        assert bodies(sub) == [5, 7, 9]
        session.recover()
        assert bodies(sub) == [5, 7, 9]  # redelivered: the selected ones only
        session.acknowledge()
        assert bodies(sub, 0.5) == []

    def test_invalid_selector_raises_with_position(
        self, connect: Connections, topic_name: str
    ) -> None:
        """An invalid selector raises InvalidSelectorError naming its position."""
        session = connect().create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        with pytest.raises(InvalidSelectorError) as info:
            session.create_subscriber(topic, "price >> 3")
        assert info.value.position == 7

    def test_no_local_stops_messages_of_its_own_connection(
        self, connect: Connections, topic_name: str
    ) -> None:
        """noLocal drops what this connection published, not what another one did."""
        mine, other = connect(), connect()
        session = mine.create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        local = session.create_subscriber(topic, no_local=True)
        everything = session.create_subscriber(topic)
        session.create_publisher(topic).publish(Quote("mine", 1.0, 1))
        other.create_topic_session().create_publisher(topic).publish(Quote("other", 2.0, 2))
        assert bodies(local) == [2]
        assert sorted(bodies(everything)) == [1, 2]


class TestDurable:
    def test_accumulates_while_inactive(self, connect: Connections, topic_name: str) -> None:
        """A durable subscription keeps what is published while its consumer is closed."""
        session = connect("client-a").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "audit")
        pub = session.create_publisher(topic)
        pub.publish(Quote("A", 1.0, 1))
        assert bodies(sub) == [1]
        sub.close()
        for q in quotes(3, start=2):
            pub.publish(q)
        again = session.create_durable_subscriber(topic, "audit")
        assert bodies(again) == [2, 3, 4]

    def test_identified_by_client_id_and_name(self, connect: Connections, topic_name: str) -> None:
        """Another connection with the same client id resumes the subscription; another
        client id with the same name has its own."""
        first = connect("client-a").create_topic_session()
        topic = first.create_topic(topic_name, Quote)
        first.create_durable_subscriber(topic, "audit").close()
        other_client = connect("client-b").create_topic_session()
        theirs = other_client.create_durable_subscriber(topic, "audit")
        first.create_publisher(topic).publish(Quote("A", 1.0, 1))
        assert bodies(theirs) == [1]
        resumed = (
            connect("client-a").create_topic_session().create_durable_subscriber(topic, "audit")
        )
        assert bodies(resumed) == [1]

    def test_needs_a_client_id(self, connect: Connections, topic_name: str) -> None:
        """Without a client id, creating a durable subscriber raises."""
        session = connect().create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        with pytest.raises(PreconditionNotMetError, match="client id"):
            session.create_durable_subscriber(topic, "audit")

    def test_client_id_is_set_once_before_use(self, connect: Connections) -> None:
        """set_client_id works on a fresh connection and raises afterwards."""
        connection = connect(start=False)
        connection.set_client_id("late")
        assert connection.client_id == "late"
        with pytest.raises(IllegalOperationError):
            connection.set_client_id("again")

    def test_second_active_consumer_raises(self, connect: Connections, topic_name: str) -> None:
        """Only one consumer of an unshared durable may be active, in any connection."""
        session = connect("client-a").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        first = session.create_durable_subscriber(topic, "audit")
        elsewhere = connect("client-a").create_topic_session()
        with pytest.raises(PreconditionNotMetError, match="active consumer"):
            elsewhere.create_durable_subscriber(topic, "audit")
        first.close()
        elsewhere.create_durable_subscriber(topic, "audit")

    def test_unacknowledged_messages_block_re_creation(
        self, connect: Connections, topic_name: str
    ) -> None:
        """A closed consumer whose messages the session has not acknowledged keeps the
        subscription in use: re-creating and unsubscribing raise until acknowledge."""
        session = connect("client-a").create_topic_session(AcknowledgeMode.CLIENT)
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "audit")
        session.create_publisher(topic).publish(Quote("A", 1.0, 1))
        message = sub.receive(WAIT)
        assert message is not None
        sub.close()
        with pytest.raises(PreconditionNotMetError):
            session.create_durable_subscriber(topic, "audit")
        with pytest.raises(PreconditionNotMetError):
            session.unsubscribe("audit")
        message.acknowledge()
        again = session.create_durable_subscriber(topic, "audit")
        assert bodies(again, 0.5) == []  # acknowledged: not delivered again

    def test_other_selector_or_topic_replaces_it(
        self, connect: Connections, topic_name: str
    ) -> None:
        """Same name with another selector, noLocal or topic: the old subscription (and
        what it accumulated) is deleted and a new one created."""
        session = connect("client-a").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        pub = session.create_publisher(topic)
        session.create_durable_subscriber(topic, "audit").close()
        pub.publish(Quote("A", 1.0, 1))
        replaced = session.create_durable_subscriber(topic, "audit", "seq > 0")
        pub.publish(Quote("A", 2.0, 2))
        assert bodies(replaced) == [2]  # the message kept by the old one went with it
        replaced.close()
        pub.publish(Quote("A", 3.0, 3))
        same = session.create_durable_subscriber(topic, "audit", "seq > 0")
        assert bodies(same) == [3]  # same selector: the same subscription
        same.close()
        pub.publish(Quote("A", 4.0, 4))
        no_local = session.create_durable_subscriber(topic, "audit", "seq > 0", no_local=True)
        assert bodies(no_local, 0.5) == []
        no_local.close()
        other_topic = session.create_topic(topic_name + "_b", Quote)
        moved = session.create_durable_subscriber(other_topic, "audit")
        session.create_publisher(other_topic).publish(Quote("B", 5.0, 5))
        pub.publish(Quote("A", 6.0, 6))
        assert bodies(moved) == [5]

    def test_same_name_as_a_shared_durable_raises(
        self, connect: Connections, topic_name: str
    ) -> None:
        """An unshared durable cannot take the name of a shared durable of the client id."""
        session = connect("client-a").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        session.create_shared_durable_subscriber(topic, "audit").close()
        with pytest.raises(PreconditionNotMetError, match="shared durable"):
            session.create_durable_subscriber(topic, "audit")

    def test_no_local_durable_drops_messages_of_the_same_client_id(
        self, connect: Connections, topic_name: str
    ) -> None:
        """With noLocal, messages from any connection with the same client id are never added."""
        a1 = connect("client-a").create_topic_session()
        topic = a1.create_topic(topic_name, Quote)
        sub = a1.create_durable_subscriber(topic, "audit", no_local=True)
        sub.close()
        a2 = connect(start=False)  # another connection of the same client id
        a2.set_client_id("client-a")
        a2.create_topic_session().create_publisher(topic).publish(Quote("A", 1.0, 1))
        connect("client-b").create_topic_session().create_publisher(topic).publish(
            Quote("B", 2.0, 2)
        )
        again = a1.create_durable_subscriber(topic, "audit", no_local=True)
        assert bodies(again) == [2]

    def test_unsubscribe(self, connect: Connections, topic_name: str) -> None:
        """unsubscribe deletes the subscription and its messages; raises while a consumer is
        active; names an unknown subscription."""
        session = connect("client-a").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "audit")
        with pytest.raises(PreconditionNotMetError, match="in use"):
            session.unsubscribe("audit")
        sub.close()
        session.create_publisher(topic).publish(Quote("A", 1.0, 1))
        session.unsubscribe("audit")
        fresh = session.create_durable_subscriber(topic, "audit")
        assert bodies(fresh, 0.5) == []
        fresh.close()
        with pytest.raises(InvalidDestinationError, match="'nothing'"):
            session.unsubscribe("nothing")

    def test_durable_on_a_temporary_topic_is_an_invalid_destination(
        self, connect: Connections
    ) -> None:
        """A durable subscription needs a non-temporary topic."""
        session = connect("client-a").create_topic_session()
        with pytest.raises(InvalidDestinationError):
            session.create_durable_subscriber(session.create_temporary_topic(Quote), "audit")


class TestTemporaryTopics:
    def test_only_the_owning_connection_consumes(self, connect: Connections) -> None:
        """The owner receives; another connection may publish but not subscribe."""
        owner = connect().create_topic_session()
        temp = owner.create_temporary_topic(Quote)
        assert isinstance(temp, TemporaryTopic)
        sub = owner.create_subscriber(temp)
        other = connect().create_topic_session()
        with pytest.raises(InvalidDestinationError, match="another connection"):
            other.create_subscriber(temp)
        stranger = TemporaryTopic(temp.name, Quote)  # its name sent elsewhere (JMSReplyTo)
        with pytest.raises(InvalidDestinationError):
            other.create_subscriber(stranger)
        other.create_publisher(temp).publish(Quote("reply", 1.0, 1))
        assert bodies(sub) == [1]

    def test_deleting_with_active_consumers_raises(self, connect: Connections) -> None:
        """delete raises while a consumer is open; afterwards the topic is unusable."""
        session = connect().create_topic_session()
        temp = session.create_temporary_topic(Quote)
        sub = session.create_subscriber(temp)
        with pytest.raises(PreconditionNotMetError, match="active"):
            temp.delete()
        sub.close()
        temp.delete()
        with pytest.raises(InvalidDestinationError, match="deleted"):
            session.create_subscriber(temp)
        with pytest.raises(InvalidDestinationError, match="deleted"):
            session.create_publisher(temp)

    def test_lifetime_is_the_connection(self, connect: Connections) -> None:
        """Closing the connection ends its temporary topics."""
        connection = connect()
        temp = connection.create_topic_session().create_temporary_topic(Quote)
        connection.close()
        with pytest.raises((InvalidDestinationError, AlreadyClosedError)):
            temp.delete()


class TestPublishers:
    def test_unidentified_publisher_names_the_topic_on_each_send(
        self, connect: Connections, topic_name: str
    ) -> None:
        """create_publisher(None) publishes to the topic each call names, and needs one."""
        session = connect().create_topic_session()
        a = session.create_topic(topic_name, Quote)
        b = session.create_topic(topic_name + "_b", Quote)
        sub_a, sub_b = session.create_subscriber(a), session.create_subscriber(b)
        pub = session.create_publisher(None)
        assert pub.topic is None
        pub.publish(Quote("A", 1.0, 1), a)
        pub.publish(Quote("B", 2.0, 2), b)
        with pytest.raises(InvalidDestinationError):
            pub.publish(Quote("C", 3.0, 3))
        assert bodies(sub_a) == [1]
        assert bodies(sub_b) == [2]

    def test_each_publisher_is_its_own_ordered_sequence(
        self, connect: Connections, topic_name: str
    ) -> None:
        """Messages of each publisher arrive in its order, with distinct message ids."""
        connect_kw = connect.kw
        connect.kw = {**connect_kw, "channel_count": 4}
        session = connect().create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_subscriber(topic)
        pubs = [session.create_publisher(topic) for _ in range(3)]
        ids = set()
        for i in range(30):
            ids.add(pubs[i % 3].publish(Quote(f"p{i % 3}", 0.0, i)))
        got: list[Message[Quote]] = []
        while (m := sub.receive(1.0)) is not None:
            got.append(m)
        assert len(got) == 30
        assert len(ids) == 30
        for p in range(3):
            seqs = [m.body.seq for m in got if m.body.symbol == f"p{p}"]
            assert seqs == sorted(seqs)
        assert {m.message_id for m in got} == ids

    def test_headers_travel_and_are_selectable(self, connect: Connections, topic_name: str) -> None:
        """Priority, correlation id and type reach the subscriber and its selector."""
        session = connect().create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_subscriber(topic, "JMSPriority > 6 AND JMSCorrelationID = 'c1'")
        pub = session.create_publisher(topic)
        pub.publish(Quote("A", 1.0, 1), priority=9, correlation_id="c1", jms_type="t")
        pub.publish(Quote("A", 2.0, 2), priority=9)
        pub.publish(Quote("A", 3.0, 3), priority=2, correlation_id="c1")
        message = sub.receive(WAIT)
        assert message is not None
        assert message.body.seq == 1
        assert (message.priority, message.correlation_id, message.jms_type) == (9, "c1", "t")
        assert sub.receive(0.5) is None


class TestAcknowledgement:
    def test_client_mode_recover_redelivers_unacknowledged(
        self, connect: Connections, topic_name: str
    ) -> None:
        """acknowledge covers everything consumed so far; recover redelivers the rest."""
        session = connect("client-a").create_topic_session(AcknowledgeMode.CLIENT)
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "audit")
        pub = session.create_publisher(topic)
        for q in quotes(4):
            pub.publish(q)
        first = sub.receive(WAIT)
        second = sub.receive(WAIT)
        assert first is not None
        assert second is not None
        first.acknowledge()  # acknowledges both
        third = sub.receive(WAIT)
        assert third is not None
        assert third.body.seq == 2
        session.recover()
        again = [sub.receive(WAIT) for _ in range(2)]
        assert [m.body.seq for m in again if m] == [2, 3]  # from the oldest unacknowledged
        assert again[0] is not None
        assert again[0].redelivered

    def test_auto_mode_acknowledges_on_receive(self, connect: Connections, topic_name: str) -> None:
        """In auto mode a received message is acknowledged: a new consumer does not get it."""
        session = connect("client-a").create_topic_session(AcknowledgeMode.AUTO)
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "audit")
        pub = session.create_publisher(topic)
        for q in quotes(3):
            pub.publish(q)
        assert sub.receive(WAIT) is not None
        sub.close()
        assert bodies(session.create_durable_subscriber(topic, "audit")) == [1, 2]

    def test_dups_ok_mode_acknowledges_lazily(self, connect: Connections, topic_name: str) -> None:
        """dups-ok acknowledges on a timer: what was received is gone after close."""
        session = connect("client-a").create_topic_session(AcknowledgeMode.DUPS_OK)
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "audit")
        pub = session.create_publisher(topic)
        for q in quotes(5):
            pub.publish(q)
        assert bodies(sub) == [0, 1, 2, 3, 4]
        sub.close()
        assert bodies(session.create_durable_subscriber(topic, "audit"), 0.5) == []

    def test_transacted_commit_and_rollback(self, connect: Connections, topic_name: str) -> None:
        """Published messages go out at commit; rollback drops them and redelivers consumed."""
        connection = connect("client-a")
        tx = connection.create_topic_session(AcknowledgeMode.TRANSACTED)
        assert tx.transacted
        watcher = connection.create_topic_session()
        topic = tx.create_topic(topic_name, Quote)
        seen = watcher.create_subscriber(topic)
        sub = tx.create_durable_subscriber(topic, "audit")
        pub = tx.create_publisher(topic)
        pub.publish(Quote("A", 1.0, 1))
        assert seen.receive(0.5) is None  # held until commit
        tx.rollback()
        pub.publish(Quote("A", 2.0, 2))
        tx.commit()
        assert bodies(seen) == [2]
        m = sub.receive(WAIT)
        assert m is not None
        assert m.body.seq == 2
        tx.rollback()
        m = sub.receive(WAIT)
        assert m is not None
        assert (m.body.seq, m.redelivered) == (2, True)
        tx.commit()
        sub.close()
        assert bodies(tx.create_durable_subscriber(topic, "audit"), 0.5) == []
        with pytest.raises(IllegalOperationError):
            watcher.commit()


def test_errors_are_dcps_errors() -> None:
    """Every JMS exception maps into the DcpsError hierarchy."""
    for cls in (InvalidDestinationError, InvalidSelectorError, IllegalOperationError):
        assert issubclass(cls, DcpsError)
    assert callable(eventually)


class TestMessageListeners:
    def test_a_listener_gets_every_message_on_its_thread(
        self, connect: Connections, topic_name: str
    ) -> None:
        """set_message_listener delivers each message to the callable on another thread
        (acknowledged after it returns); receive is refused meanwhile; None stops it."""
        session = connect("client-l").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "listened")
        got: list[tuple[int, str]] = []
        sub.set_message_listener(
            lambda m: got.append((m.body.seq, threading.current_thread().name))
        )
        assert sub.message_listener is not None
        with pytest.raises(IllegalOperationError, match="listener"):
            sub.receive(0.1)
        pub = session.create_publisher(topic)
        for q in quotes(3):
            pub.publish(q)
        eventually(lambda: len(got) == 3, WAIT, "three messages at the listener")
        assert [seq for seq, _ in got] == [0, 1, 2]
        assert {name for _, name in got} == {"dcps-jms-listener"}
        sub.set_message_listener(None)
        pub.publish(Quote("A", 9.0, 9))
        m = sub.receive(WAIT)
        assert m is not None
        assert (m.body.seq, m.redelivered) == (9, False)  # 0..2 were acknowledged

    def test_a_listener_that_raises_gets_the_message_again(
        self, connect: Connections, topic_name: str
    ) -> None:
        """AUTO mode: a message whose listener raised is redelivered, marked redelivered."""
        session = connect("client-r").create_topic_session()
        topic = session.create_topic(topic_name, Quote)
        sub = session.create_durable_subscriber(topic, "flaky")
        calls: list[tuple[int, bool]] = []

        def listener(m: Message[Quote]) -> None:
            calls.append((m.body.seq, m.redelivered))
            if len(calls) == 1:
                raise RuntimeError("first delivery fails")

        sub.set_message_listener(listener)
        session.create_publisher(topic).publish(Quote("A", 1.0, 5))
        eventually(lambda: len(calls) >= 2, WAIT, "the redelivery")
        assert calls[:2] == [(5, False), (5, True)]
        sub.close()
