"""The durables' key exchange, driven directly (issue 20: the survivor of
``dcps/store/_durables.py`` that test_durables_mutants.py left).

With a namespace key, a durable subscriber authenticates its later requests with a
secret agreed in DURABLE_SUBSCRIBE: its offer goes in the request, the store's public
value comes back in the answer, and both sides derive the same secret. Here the store's
``DurableService`` runs on a real log with a sealer of a real key; the subscriber's
half is the client's own ``MemberOffer``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps.store._durables import DurableService, secret_ident
from dcps.store._log import ChannelLog, SyncMode
from dcps.wire._auth_keys import write_key_file
from dcps.wire._auth_member import MemberOffer
from dcps.wire._durables import (
    DURABLE_GROUP_PREFIX,
    DurableKind,
    DurableSubscribed,
    DurableSubscribeRequest,
)
from dcps.wire._sealing import Sealer
from idl._errors import BadParameterError

T = "orders"
INCARNATION = "inc-1"


class KeyedStore:
    """A keyed store's durables on a real log; answers and kept secrets recorded."""

    def __init__(self, path: Path) -> None:
        self.answers: list[Any] = []
        self.secrets: list[tuple[tuple[str, str, str], Any]] = []
        self.log = ChannelLog.in_dir(path / "store", sync=SyncMode.NORMAL)
        self.log.ensure_topic(T, 2)
        self.svc = DurableService(
            self.log,
            lambda call, answer: self.answers.append(answer),
            lambda call, exc: self.answers.append(exc),
            clock=lambda: 1000.0,
            sealer=Sealer.from_keys(write_key_file(path / "ns.key"), None),
            incarnation=INCARNATION,
            secrets=lambda ident, secret: self.secrets.append((ident, secret)),
        )

    def ask(self, request: Any) -> Any:
        self.svc.handle(_Call(request))
        return self.answers[-1]


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
