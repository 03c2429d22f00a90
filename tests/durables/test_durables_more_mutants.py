"""The durables' key exchange, driven directly (issue 20: the survivor of
``dcps/store/_durables.py`` that test_durables_mutants.py left).

With a namespace key, a durable subscriber authenticates its later requests with a
secret agreed in DURABLE_SUBSCRIBE: its offer goes in the request, the store's public
value comes back in the answer, and both sides derive the same secret. Here the store's
``DurableService`` runs on a real log with a sealer of a real key; the subscriber's
half is the client's own ``MemberOffer``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps.store._durables import DurableService, secret_ident
from dcps.store._log import ChannelLog, SyncMode
from dcps.wire._auth_keys import load_key, write_key_file
from dcps.wire._auth_member import MemberOffer
from dcps.wire._durables import (
    DURABLE_GROUP_PREFIX,
    DurableDelivery,
    DurableKind,
    DurablePollRequest,
    DurableRollbackRequest,
    DurableSubscribed,
    DurableSubscribeRequest,
)
from dcps.wire._sealing import Sealer
from idl._errors import BadParameterError, DcpsError

T = "orders"
INCARNATION = "inc-1"


class KeyedStore:
    """A keyed store's durables on a real log; answers and kept secrets recorded."""

    def __init__(self, path: Path) -> None:
        self.path = path
        key_file = path / "ns.key"
        key = load_key(key_file) if key_file.exists() else write_key_file(key_file)
        self.answers: list[Any] = []
        self.secrets: list[tuple[tuple[str, str, str], Any]] = []
        self.log = ChannelLog.in_dir(path / "store", sync=SyncMode.NORMAL)
        self.log.ensure_topic(T, 2)
        self.svc = DurableService(
            self.log,
            lambda call, answer: self.answers.append(answer),
            lambda call, exc: self.answers.append(exc),
            clock=lambda: 1000.0,
            sealer=Sealer.from_keys(key, None),
            incarnation=INCARNATION,
            secrets=lambda ident, secret: self.secrets.append((ident, secret)),
        )

    def ask(self, request: Any) -> Any:
        self.svc.handle(_Call(request))
        return self.answers[-1]

    def subscribe(self, name: str = "d", subscriber: str = "s1") -> DurableSubscribed:
        request = DurableSubscribeRequest(
            T, name, subscriber, kind=DurableKind.SHARED, offer=MemberOffer().public
        )
        got = self.ask(request)
        assert isinstance(got, DurableSubscribed)
        return got

    def refuse(self, sql: str) -> None:
        """Make the log refuse what ``sql`` (a trigger) says, as a full or broken disk would."""
        other = sqlite3.connect(self.log.path)
        other.execute(sql)
        other.commit()
        other.close()


class _Call:
    def __init__(self, request: Any) -> None:
        self.request = request
        self.client = "c1"
        self.request_id = 1


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[KeyedStore]:
    s = KeyedStore(tmp_path)
    try:
        yield s
    finally:
        s.log.close()


class TestKeyExchange:
    def test_the_subscriber_and_the_store_agree_on_its_secret(self, keyed: KeyedStore) -> None:
        """The answer carries the store's public value; from it the subscriber derives the
        secret the store keeps for it, under the durable's group name."""
        offer = MemberOffer()
        got = keyed.ask(
            DurableSubscribeRequest(T, "d", "s1", kind=DurableKind.SHARED, offer=offer.public)
        )
        assert isinstance(got, DurableSubscribed)
        assert got.exchange
        group = DURABLE_GROUP_PREFIX + "d"
        mine = offer.finish(got.exchange, group=group, member="s1", incarnation=INCARNATION)
        ((ident, kept),) = keyed.secrets
        assert ident == secret_ident(T, "d", "s1")
        assert (kept.key, kept.group, kept.member, kept.incarnation) == (
            mine.key,
            group,
            "s1",
            INCARNATION,
        )

    def test_a_subscribe_without_an_offer_is_refused_by_a_keyed_store(
        self, keyed: KeyedStore
    ) -> None:
        with pytest.raises(BadParameterError) as info:
            keyed.ask(DurableSubscribeRequest(T, "d", "s1", kind=DurableKind.SHARED))
        assert str(info.value) == (
            "a DURABLE_SUBSCRIBE of 's1' to durable 'd' of topic 'orders' carries no "
            "key-exchange offer: the store's namespace has a key"
        )
        assert keyed.secrets == []


class TestFailuresNameWhatFailed:
    """A log operation that fails names what the store was doing, with the durable."""

    def test_a_failed_delete(self, keyed: KeyedStore) -> None:
        keyed.subscribe()
        keyed.refuse(
            "CREATE TRIGGER keep BEFORE DELETE ON durables "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
        with pytest.raises(DcpsError) as failed:
            keyed.svc.delete(T, "d", force=True)
        assert ": deleting durable 'd' failed: " in str(failed.value)

    def test_a_failed_reset(self, keyed: KeyedStore) -> None:
        keyed.subscribe()
        keyed.refuse("DROP TABLE durable_delivered")  # its DELETE fails: no such table
        with pytest.raises(DcpsError) as failed:
            keyed.svc.reset(T, "d", lambda group: None, force=True)
        assert ": forgetting the acknowledgements of durable 'd' failed: " in str(failed.value)

    def test_a_failed_load_at_start(self, keyed: KeyedStore, tmp_path: Path) -> None:
        keyed.subscribe()
        keyed.refuse("DROP TABLE durable_values")
        keyed.log.close()
        with pytest.raises(DcpsError) as failed:
            KeyedStore(tmp_path)
        assert ": loading durable 'd' failed: " in str(failed.value)


class TestHeldRedeliveries:
    def test_a_redelivery_whose_count_cannot_be_written_is_refused_not_answered(
        self, keyed: KeyedStore
    ) -> None:
        """A persistent durable answers a redelivery once its delivery count is written,
        at the round's end; when that write fails, the poll gets the error and the
        elements stay to be delivered again (never delivered with a count not kept)."""
        keyed.subscribe()
        payloads = [v.to_bytes(4, "little") for v in (1, 2)]
        placed = keyed.log.append(T, 0, payloads)
        keyed.svc.published(T, 0, placed[0][0], placed[0][1], payloads)
        keyed.svc.handle(_Call(DurablePollRequest(T, "d", "s1", 10)))
        keyed.svc.tick()
        assert isinstance(keyed.answers[-1], DurableDelivery)
        keyed.ask(DurableRollbackRequest(T, "d", "s1", ((0, 1),)))
        keyed.refuse(
            "CREATE TRIGGER full BEFORE INSERT ON durable_deliveries "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
        keyed.refuse(
            "CREATE TRIGGER full_too BEFORE UPDATE ON durable_deliveries "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
        answered = len(keyed.answers)
        keyed.svc.handle(_Call(DurablePollRequest(T, "d", "s1", 10)))
        assert len(keyed.answers) == answered  # held for the round's end
        keyed.svc.tick()
        assert len(keyed.answers) == answered + 1
        assert isinstance(keyed.answers[-1], DcpsError)
        assert "refused by a trigger" in str(keyed.answers[-1])
        keyed.refuse("DROP TRIGGER full")
        keyed.refuse("DROP TRIGGER full_too")
        keyed.svc.handle(_Call(DurablePollRequest(T, "d", "s1", 10)))
        keyed.svc.tick()
        again = keyed.answers[-1]
        assert isinstance(again, DurableDelivery)
        assert (again.offsets, bytes(again.data)) == ((1,), (2).to_bytes(4, "little"))
