"""Store-protocol authentication: key files, sealed trailers, replay, admin key, member secrets.

The module is pure (bytes in, bytes out), so these tests need no DDS: a
"message" is a body and its trailer, an attacker is whoever edits, replays or
forges them, and time is a clock the test moves.
"""

from __future__ import annotations

import hmac
import itertools
import logging
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcps import DcpsError, IllegalOperationError, PreconditionNotMetError
from dcps.wire._auth import (
    MEMBER_TRAILER_BYTES,
    TRAILER_BYTES,
    AuthenticationError,
    Authenticator,
    DropReason,
    RateLimitedLog,
)
from dcps.wire._auth_keys import (
    KeyFileError,
    StoreKey,
    accepted_keys_from_environment,
    key_from_environment,
    load_key,
    write_key_file,
)
from dcps.wire._auth_member import PUBLIC_VALUE_BYTES, MemberOffer
from dcps.wire._auth_replay import ReplayTable
from dcps.wire._messages import LiveBatch, Reply, Request
from dcps.wire._sealing import Sealer

KEY = StoreKey(b"k" * 32, source="test")
OTHER_KEY = StoreKey(b"o" * 32, source="other")
ADMIN_KEY = StoreKey(b"a" * 32, source="admin")
INC = "store-1"
SECOND = 1_000_000_000


class Clock:
    """A wall clock in nanoseconds that only moves when the test says so."""

    def __init__(self, now: int = 1_700_000_000 * SECOND) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * SECOND)


def pair(**kwargs: object) -> tuple[Authenticator, Authenticator, Clock]:
    """A sealing and an opening authenticator of one namespace sharing one clock."""
    clock = Clock()
    sender = Authenticator(KEY, clock=clock, **kwargs)  # type: ignore[arg-type]
    receiver = Authenticator(KEY, clock=clock, **kwargs)  # type: ignore[arg-type]
    return sender, receiver, clock


def refused(reason: DropReason) -> Any:
    """pytest.raises for an AuthenticationError of ``reason``."""
    return pytest.raises(AuthenticationError, match=reason.value)


def flip(data: bytes, index: int) -> bytes:
    """``data`` with the low bit of byte ``index`` (negative counts from the end) flipped."""
    index %= len(data)
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


class TestRoundTrip:
    def test_sealed_message_opens(self) -> None:
        """A message sealed by one process opens in another process holding the same key."""
        sender, receiver, _ = pair()
        trailer = sender.seal("request/publish", "client-a", b"payload", incarnation=INC)
        assert len(trailer) == TRAILER_BYTES
        receiver.open("request/publish", "client-a", b"payload", trailer, incarnation=INC)
        assert receiver.drops() == dict.fromkeys(DropReason, 0)

    @settings(max_examples=60, deadline=None)
    @given(
        kind=st.text(min_size=1, max_size=20),
        sender_id=st.text(max_size=40),
        body=st.binary(max_size=2048),
    )
    def test_any_kind_sender_and_body_round_trip(
        self, kind: str, sender_id: str, body: bytes
    ) -> None:
        """Any kind, sender id (any Unicode) and body seal and open unchanged."""
        sender, receiver, _ = pair()
        trailer = sender.seal(kind, sender_id, body, incarnation=INC)
        receiver.open(kind, sender_id, body, trailer, incarnation=INC)

    @pytest.mark.parametrize("secret", [b"k" * 32, b"long" * 40])
    def test_tag_is_standard_hmac_sha256(self, secret: bytes) -> None:
        """The tag is plain RFC 2104 HMAC-SHA256 over label, header, names and body, so any
        implementation (another language, a capture analyser) can check it."""
        key = StoreKey(secret)
        trailer = Authenticator(key).seal("reply", "s", b"body", incarnation="i")
        header, tag = trailer[:22], trailer[22:TRAILER_BYTES]
        names = b"".join(len(n).to_bytes(4, "big") + n for n in (b"reply", b"s", b"i"))
        data = b"dcps-auth/v1\x00" + header + names + b"body"
        assert tag == hmac.digest(secret, data, "sha256")

    @settings(max_examples=40, deadline=None)
    @given(body=st.binary(max_size=9000), data=st.data())
    def test_body_in_parts_is_the_same_message(self, body: bytes, data: st.DataObject) -> None:
        """A body given in consecutive parts (a receiver hashing a sample's CDR in place), and
        a long body (hashed in slices), seal and open as the plain bytes would: the tag is
        the standard HMAC of the whole; a changed part is refused."""
        cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=4)))
        bounds = [0, *cuts, len(body)]
        parts = tuple(memoryview(body)[a:b] for a, b in itertools.pairwise(bounds))
        sender, receiver, _ = pair()
        trailer = sender.seal("live_batch", "s/t/3", parts, incarnation=INC)
        header, tag = trailer[:22], trailer[22:TRAILER_BYTES]
        labels = (b"live_batch", b"s/t/3", INC.encode())
        names = b"".join(len(n).to_bytes(4, "big") + n for n in labels)
        data_ = b"dcps-auth/v1\x00" + header + names + body
        assert tag == hmac.digest(KEY.secret, data_, "sha256")
        receiver.open("live_batch", "s/t/3", body, trailer, incarnation=INC)
        if body:
            i = max(k for k, part in enumerate(parts) if len(part))
            changed = (*parts[:i], flip(bytes(parts[i]), -1), *parts[i + 1 :])
            with refused(DropReason.BAD_TAG):
                receiver.open("live_batch", "s/t/3", changed, trailer, incarnation=INC)

    def test_error_is_a_dcps_error_naming_kind_sender_reason(self) -> None:
        """A refusal is a typed DcpsError (IllegalOperationError) naming kind, sender and reason."""
        _, receiver, _ = pair()
        with pytest.raises(AuthenticationError) as info:
            receiver.open("reply", "store-x", b"", b"short", incarnation=INC)
        err = info.value
        assert isinstance(err, IllegalOperationError)
        assert isinstance(err, DcpsError)
        assert (err.reason, err.kind, err.sender) == (DropReason.MALFORMED, "reply", "store-x")
        assert "reply" in str(err)
        assert "store-x" in str(err)
        assert "5 bytes" in str(err)


class TestTampering:
    def setup_method(self) -> None:
        self.sender, self.receiver, self.clock = pair()
        self.body = b"commit channel 3 offset 41"
        self.trailer = self.sender.seal("request/fetch", "client-a", self.body, incarnation=INC)

    def test_tampered_body(self) -> None:
        """A body changed in one bit is refused as a bad tag."""
        with refused(DropReason.BAD_TAG):
            self.receiver.open(
                "request/fetch", "client-a", flip(self.body, 5), self.trailer, incarnation=INC
            )

    def test_tampered_tag(self) -> None:
        """A tag changed in one bit is refused."""
        with refused(DropReason.BAD_TAG):
            self.receiver.open(
                "request/fetch", "client-a", self.body, flip(self.trailer, -1), incarnation=INC
            )

    def test_other_sender(self) -> None:
        """A message cannot be passed off as another client's."""
        with refused(DropReason.BAD_TAG):
            self.receiver.open(
                "request/fetch", "client-b", self.body, self.trailer, incarnation=INC
            )

    def test_other_kind(self) -> None:
        """A message of one kind cannot be passed off as another kind (domain separation)."""
        with refused(DropReason.BAD_TAG):
            self.receiver.open("request/seek", "client-a", self.body, self.trailer, incarnation=INC)

    def test_other_store_incarnation(self) -> None:
        """A message addressed to one store incarnation is refused by another (restarted) one."""
        with refused(DropReason.BAD_TAG):
            self.receiver.open(
                "request/fetch", "client-a", self.body, self.trailer, incarnation="store-2"
            )

    def test_other_namespace_key(self) -> None:
        """A participant with another key (or none) cannot produce an accepted message."""
        forger = Authenticator(OTHER_KEY, clock=self.clock)
        forged = forger.seal("request/fetch", "client-a", self.body, incarnation=INC)
        with refused(DropReason.UNKNOWN_KEY):
            self.receiver.open("request/fetch", "client-a", self.body, forged, incarnation=INC)

    def test_forged_key_id(self) -> None:
        """Copying the right key id onto a tag made with another key still fails the tag."""
        forger = Authenticator(OTHER_KEY, clock=self.clock)
        forged = bytearray(forger.seal("request/fetch", "client-a", self.body, incarnation=INC))
        forged[2:6] = KEY.key_id
        with refused(DropReason.BAD_TAG):
            self.receiver.open(
                "request/fetch", "client-a", self.body, bytes(forged), incarnation=INC
            )

    @settings(max_examples=80, deadline=None)
    @given(data=st.data())
    def test_any_bit_flip_in_trailer_or_body_is_refused(self, data: st.DataObject) -> None:
        """Flipping any one bit anywhere in body or trailer makes the message unacceptable."""
        sender, receiver, _ = pair()
        body = data.draw(st.binary(min_size=1, max_size=256))
        trailer = sender.seal("reply", INC, body, incarnation=INC)
        target = data.draw(st.sampled_from(["body", "trailer"]))
        blob = body if target == "body" else trailer
        index = data.draw(st.integers(0, len(blob) - 1))
        bit = data.draw(st.integers(0, 7))
        changed = blob[:index] + bytes([blob[index] ^ (1 << bit)]) + blob[index + 1 :]
        if target == "body":
            body, changed = changed, trailer
        with pytest.raises(AuthenticationError):
            receiver.open("reply", INC, body, changed, incarnation=INC)

    def test_missing_or_truncated_trailer(self) -> None:
        """An absent or cut trailer is refused as malformed, not as an index error."""
        for bad in (b"", self.trailer[:-1], self.trailer + b"x"):
            with refused(DropReason.MALFORMED):
                self.receiver.open("request/fetch", "client-a", self.body, bad, incarnation=INC)


class TestSealedWire:
    """What the writers send (the sealed XCDR1 bytes of ``Sealer.seal_*``) and what readers
    check (``accept_*`` on the sample decoded from those bytes, hashed in place)."""

    def setup_method(self) -> None:
        clock = Clock()
        self.sender = Sealer(Authenticator(KEY, clock=clock))
        self.receiver = Sealer(Authenticator(KEY, clock=clock))

    @pytest.mark.parametrize("elements", [0, 1, 3, 40, 400])
    def test_live_batch_bytes_decode_and_verify(self, elements: int) -> None:
        """A sealed live batch's bytes are padded to 4 (as Cyclone writes samples), decode to the
        batch with its trailer, verify once, and fail in any changed element byte."""
        sizes, blob = [5] * elements, os.urandom(5 * elements)  # odd sizes: the padding varies
        batch = LiveBatch(topic="t", channel=3, first=7, timestamp=1, sizes=sizes, blob=blob)
        wire = self.sender.seal_live(batch, INC)
        assert wire is not None
        assert len(wire) % 4 == 0
        got = LiveBatch.deserialize(wire)
        assert (got.blob, got.sizes, got.auth) == (batch.blob, batch.sizes, batch.auth)
        assert self.receiver.accept_live(got, INC, "t", 3)
        assert not self.receiver.accept_live(LiveBatch.deserialize(wire), INC, "t", 3)  # replay
        if batch.blob:
            i = wire.index(batch.blob) + len(batch.blob) - 1
            tampered = LiveBatch.deserialize(wire[:i] + bytes([wire[i] ^ 1]) + wire[i + 1 :])
            assert not self.receiver.accept_live(tampered, INC, "t", 3)
        assert self.receiver.drops()[DropReason.BAD_TAG] == (1 if batch.blob else 0)

    def test_request_and_reply_bytes_verify(self) -> None:
        """A sealed request and reply decode from their bytes and verify at the other end;
        a reply from another store incarnation does not."""
        request = Request(client="c1", request_id=5, op=2, topic="t", sizes=[3], blob=b"abc")
        wire = self.sender.seal_request(request, INC)
        assert wire is not None
        assert len(wire) % 4 == 0
        self.receiver.open_request(Request.deserialize(wire), INC)
        reply = Reply(client="c1", request_id=5, offsets=[7], stamps=[1], number=1)
        wire = self.sender.seal_reply(reply, INC)
        assert wire is not None
        assert len(wire) % 4 == 0
        assert not self.receiver.accept_reply(Reply.deserialize(wire), "store-2")
        assert self.receiver.accept_reply(Reply.deserialize(wire), INC)


class TestFreshness:
    def test_replay_of_captured_message_is_refused(self) -> None:
        """A captured message opens once; the same bytes again are refused as a replay."""
        sender, receiver, _ = pair()
        trailer = sender.seal("request/publish", "client-a", b"x", incarnation=INC)
        receiver.open("request/publish", "client-a", b"x", trailer, incarnation=INC)
        with refused(DropReason.REPLAYED):
            receiver.open("request/publish", "client-a", b"x", trailer, incarnation=INC)
        assert receiver.drops()[DropReason.REPLAYED] == 1

    def test_out_of_order_delivery_within_window_is_accepted_once(self) -> None:
        """Messages opened in another order than sealed all pass, each exactly once."""
        sender, receiver, _ = pair()
        trailers = [sender.seal("reply", INC, b"%d" % i, incarnation=INC) for i in range(50)]
        order = list(range(50))[::-1]
        for i in order:
            receiver.open("reply", INC, b"%d" % i, trailers[i], incarnation=INC)
        for i in (0, 25, 49):
            with refused(DropReason.REPLAYED):
                receiver.open("reply", INC, b"%d" % i, trailers[i], incarnation=INC)

    def test_counter_far_behind_is_refused(self) -> None:
        """A message older than the replay window (in counters) is refused, not guessed at."""
        sender, receiver, _ = pair(replay_window=16)
        old = sender.seal("reply", INC, b"old", incarnation=INC)
        for _ in range(20):
            receiver.open(
                "reply", INC, b"", sender.seal("reply", INC, b"", incarnation=INC), incarnation=INC
            )
        with refused(DropReason.REPLAYED):
            receiver.open("reply", INC, b"old", old, incarnation=INC)

    def test_stale_timestamp_is_refused(self) -> None:
        """A message older than the freshness window is refused as stale, naming its age."""
        sender, receiver, clock = pair(window=timedelta(seconds=30))
        trailer = sender.seal("request/commit-free", "c", b"x", incarnation=INC)
        clock.advance(31)
        with pytest.raises(AuthenticationError, match=r"stale \(31\.0 s old, window 30 s\)"):
            receiver.open("request/commit-free", "c", b"x", trailer, incarnation=INC)

    def test_message_just_inside_the_window_is_accepted(self) -> None:
        """A message 29 s old passes a 30 s window."""
        sender, receiver, clock = pair(window=timedelta(seconds=30))
        trailer = sender.seal("reply", INC, b"x", incarnation=INC)
        clock.advance(29)
        receiver.open("reply", INC, b"x", trailer, incarnation=INC)

    def test_future_timestamp_beyond_skew_is_refused(self) -> None:
        """A timestamp further ahead than the allowed skew is refused, hinting at the clocks."""
        clock_ahead, receiver_clock = Clock(), Clock()
        clock_ahead.advance(11)
        sender = Authenticator(KEY, clock=clock_ahead)
        receiver = Authenticator(KEY, clock=receiver_clock, skew=timedelta(seconds=10))
        trailer = sender.seal("reply", INC, b"x", incarnation=INC)
        with pytest.raises(AuthenticationError, match=r"future.*clocks"):
            receiver.open("reply", INC, b"x", trailer, incarnation=INC)
        clock_ahead.now = receiver_clock.now + 9 * SECOND
        receiver.open(
            "reply", INC, b"y", sender.seal("reply", INC, b"y", incarnation=INC), incarnation=INC
        )

    def test_durable_kinds_skip_the_window_but_not_the_tag(self) -> None:
        """An old announcement (transient-local) still opens; a tampered one does not."""
        sender, receiver, clock = pair()
        trailer = sender.seal("announcement", INC, b"share 0/1", incarnation=INC)
        clock.advance(3600)
        with refused(DropReason.BAD_TAG):
            receiver.open("announcement", INC, b"share 0/2", trailer, incarnation=INC)
        receiver.open("announcement", INC, b"share 0/1", trailer, incarnation=INC)
        with refused(DropReason.REPLAYED):
            receiver.open("announcement", INC, b"share 0/1", trailer, incarnation=INC)

    def test_restarted_sender_with_same_id_continues_above_old_counters(self) -> None:
        """A sender process restarted later (same id) is not refused as replaying itself."""
        clock = Clock()
        receiver = Authenticator(KEY, clock=clock)
        first = Authenticator(KEY, clock=clock)
        for _ in range(100):
            receiver.open(
                "reply", INC, b"", first.seal("reply", INC, b"", incarnation=INC), incarnation=INC
            )
        clock.advance(0.001)
        second = Authenticator(KEY, clock=clock)
        receiver.open(
            "reply", INC, b"", second.seal("reply", INC, b"", incarnation=INC), incarnation=INC
        )


class TestReplayTableBound:
    def test_streams_tracked_are_bounded(self) -> None:
        """However many senders appear, at most max_streams are remembered."""
        sender, receiver, clock = pair(max_streams=8)
        for i in range(100):
            clock.advance(0.001)
            who = f"client-{i}"
            receiver.open(
                "request/ping",
                who,
                b"",
                sender.seal("request/ping", who, b"", incarnation=INC),
                incarnation=INC,
            )
            assert receiver.tracked_streams <= 8
        assert receiver.tracked_streams == 8

    def test_forgotten_stream_cannot_be_replayed(self) -> None:
        """Evicting a sender's window does not reopen its captured messages to replay."""
        sender, receiver, clock = pair(max_streams=2)
        captured = sender.seal("request/ping", "victim", b"", incarnation=INC)
        receiver.open("request/ping", "victim", b"", captured, incarnation=INC)
        for who in ("a", "b", "c"):
            clock.advance(0.01)
            receiver.open(
                "request/ping",
                who,
                b"",
                sender.seal("request/ping", who, b"", incarnation=INC),
                incarnation=INC,
            )
        with refused(DropReason.REPLAYED):
            receiver.open("request/ping", "victim", b"", captured, incarnation=INC)
        clock.advance(0.01)
        fresh = sender.seal("request/ping", "victim", b"", incarnation=INC)
        receiver.open("request/ping", "victim", b"", fresh, incarnation=INC)

    def test_forgeries_do_not_grow_the_table(self) -> None:
        """Messages that fail their tag leave no state behind: forgers cannot fill memory."""
        _, receiver, clock = pair()
        forger = Authenticator(OTHER_KEY, clock=clock)
        forged_key_id = bytearray(forger.seal("request/ping", "x", b"", incarnation=INC))
        forged_key_id[2:6] = KEY.key_id
        for i in range(200):
            assert not receiver.accept(
                "request/ping", f"f{i}", b"", bytes(forged_key_id), incarnation=INC
            )
        assert receiver.tracked_streams == 0
        assert receiver.drops()[DropReason.BAD_TAG] == 200

    @settings(max_examples=50, deadline=None)
    @given(st.lists(st.integers(0, 300), min_size=1, max_size=200))
    def test_each_counter_accepted_at_most_once(self, counters: list[int]) -> None:
        """Whatever the arrival order, a counter is accepted at most once, and fresh ones always."""
        table = ReplayTable(window=64)
        accepted: set[int] = set()
        highest = -1
        for c in counters:
            ok = table.accept(("k", "s"), c, 0, floor=True)
            if c in accepted:
                assert not ok
            elif c > highest:
                assert ok
            if ok:
                accepted.add(c)
                highest = max(highest, c)


class TestAdminKey:
    def test_admin_kind_needs_admin_key_to_seal(self) -> None:
        """A client without the admin key cannot even seal a DESTROY_GROUP; the error says why."""
        client = Authenticator(KEY)
        with pytest.raises(PreconditionNotMetError, match="DCPS_STORE_ADMIN_KEY_FILE"):
            client.seal("request/destroy_group", "c", b"g", incarnation=INC)

    def test_admin_kind_sealed_with_namespace_key_is_refused(self) -> None:
        """A namespace-key holder cannot pass an admin operation by sealing it as usual."""
        clock = Clock()
        store = Authenticator(KEY, admin_key=ADMIN_KEY, clock=clock)
        client = Authenticator(KEY, admin_kinds=frozenset(), clock=clock)
        trailer = client.seal("request/destroy_group", "c", b"g", incarnation=INC)
        with refused(DropReason.ADMIN_KEY_REQUIRED):
            store.open("request/destroy_group", "c", b"g", trailer, incarnation=INC)

    def test_admin_kind_with_admin_key_is_accepted(self) -> None:
        """The admin key holder's admin operation opens at a store holding that admin key."""
        clock = Clock()
        store = Authenticator(KEY, admin_key=ADMIN_KEY, clock=clock)
        admin = Authenticator(KEY, admin_key=ADMIN_KEY, clock=clock)
        trailer = admin.seal("request/destroy_group", "c", b"g", incarnation=INC)
        store.open("request/destroy_group", "c", b"g", trailer, incarnation=INC)

    def test_store_without_admin_key_refuses_admin_kinds(self) -> None:
        """A store given no admin key refuses every admin operation."""
        clock = Clock()
        store = Authenticator(KEY, clock=clock)
        admin = Authenticator(KEY, admin_key=ADMIN_KEY, clock=clock)
        trailer = admin.seal("request/destroy_group", "c", b"g", incarnation=INC)
        with refused(DropReason.ADMIN_KEY_REQUIRED):
            store.open("request/destroy_group", "c", b"g", trailer, incarnation=INC)

    def test_admin_key_does_not_replace_namespace_key(self) -> None:
        """An ordinary request sealed with the admin key's bytes as namespace key is refused."""
        clock = Clock()
        store = Authenticator(KEY, admin_key=ADMIN_KEY, clock=clock)
        other = Authenticator(ADMIN_KEY, clock=clock)
        trailer = other.seal("request/fetch", "c", b"", incarnation=INC)
        with refused(DropReason.UNKNOWN_KEY):
            store.open("request/fetch", "c", b"", trailer, incarnation=INC)

    def test_admin_key_equal_to_namespace_key_is_refused(self) -> None:
        """Configuring the namespace key as admin key is an error, not a silent downgrade."""
        with pytest.raises(PreconditionNotMetError, match="must differ"):
            Authenticator(KEY, admin_key=StoreKey(KEY.secret, source="same"))


class TestRotation:
    def test_accepted_old_key_opens_during_rotation(self) -> None:
        """A receiver given the old key as accepted opens messages of senders still on it."""
        clock = Clock()
        old_sender = Authenticator(OTHER_KEY, clock=clock)
        receiver = Authenticator(KEY, accepted_keys=[OTHER_KEY], clock=clock)
        trailer = old_sender.seal("reply", INC, b"x", incarnation=INC)
        receiver.open("reply", INC, b"x", trailer, incarnation=INC)


class TestMemberSecrets:
    def join(self, store: Authenticator, client: Authenticator, member: str) -> tuple[object, ...]:
        offer = client.member_offer()
        assert len(offer.public) == PUBLIC_VALUE_BYTES
        store_public, store_side = store.answer_member_offer(
            offer.public, group="g", member=member, incarnation=INC
        )
        client_side = client.finish_member_offer(
            offer, store_public, group="g", member=member, incarnation=INC
        )
        return store_side, client_side

    def test_member_action_opens_only_with_the_joined_members_proof(self) -> None:
        """A commit proven by the member that joined opens; the same commit by another key holder
        (who knows the namespace key and the member id, but not the member secret) is refused."""
        clock = Clock()
        store = Authenticator(KEY, clock=clock)
        member = Authenticator(KEY, clock=clock)
        other = Authenticator(KEY, clock=clock)
        store_secret, member_secret = self.join(store, member, "m-1")
        assert store_secret == member_secret
        trailer = member.seal(
            "request/commit", "client-a", b"c3@41", incarnation=INC, member=member_secret
        )
        assert len(trailer) == MEMBER_TRAILER_BYTES
        store.open(
            "request/commit", "client-a", b"c3@41", trailer, incarnation=INC, member=store_secret
        )

        _, other_secret = self.join(store, other, "m-1")  # the intruder's own exchange
        forged = other.seal(
            "request/commit", "client-a", b"c3@99", incarnation=INC, member=other_secret
        )
        with refused(DropReason.BAD_MEMBER_PROOF):
            store.open(
                "request/commit", "client-a", b"c3@99", forged, incarnation=INC, member=store_secret
            )

    def test_member_kind_without_proof_is_refused(self) -> None:
        """A member action sealed without the member proof is refused by the store."""
        clock = Clock()
        store = Authenticator(KEY, clock=clock)
        client = Authenticator(KEY, member_kinds=frozenset(), clock=clock)
        store_secret, _ = self.join(store, Authenticator(KEY, clock=clock), "m-1")
        trailer = client.seal("request/leave", "client-a", b"", incarnation=INC)
        with refused(DropReason.BAD_MEMBER_PROOF):
            store.open(
                "request/leave", "client-a", b"", trailer, incarnation=INC, member=store_secret
            )

    def test_unknown_member_is_reported_after_the_namespace_check(self) -> None:
        """For a member the store does not know, an authentic message says UNKNOWN_MEMBER,
        a forged one BAD_TAG, so the store answers "not a member" only to key holders."""
        clock = Clock()
        store = Authenticator(KEY, clock=clock)
        client = Authenticator(KEY, clock=clock)
        _, secret = self.join(store, client, "m-1")
        trailer = client.seal("request/heartbeat", "c", b"", incarnation=INC, member=secret)
        with refused(DropReason.UNKNOWN_MEMBER):
            store.open("request/heartbeat", "c", b"", trailer, incarnation=INC, member=None)
        with refused(DropReason.BAD_TAG):
            store.open("request/heartbeat", "c", b"x", trailer, incarnation=INC, member=None)

    def test_member_action_needs_secret_to_seal(self) -> None:
        """Sealing a member action without the member secret is a programming error, said so."""
        with pytest.raises(PreconditionNotMetError, match="member secret"):
            Authenticator(KEY).seal("request/seek", "c", b"", incarnation=INC)

    def test_secret_is_bound_to_group_member_and_incarnation(self) -> None:
        """The same exchange under another group, member or incarnation gives another secret."""
        store = Authenticator(KEY)
        offer = MemberOffer()
        public, secret = store.answer_member_offer(
            offer.public, group="g", member="m", incarnation=INC
        )
        assert offer.finish(public, group="g", member="m", incarnation=INC) == secret
        for args in (("h", "m", INC), ("g", "n", INC), ("g", "m", "store-2")):
            group, member, inc = args
            assert (
                offer.finish(public, group=group, member=member, incarnation=inc).key != secret.key
            )

    @pytest.mark.parametrize(
        "public",
        [b"", bytes(PUBLIC_VALUE_BYTES), (1).to_bytes(PUBLIC_VALUE_BYTES, "big"), b"\xff" * 256],
    )
    def test_degenerate_key_exchange_values_are_refused(self, public: bytes) -> None:
        """Public values that would force a known shared secret are refused and counted."""
        store = Authenticator(KEY)
        with refused(DropReason.BAD_KEY_EXCHANGE):
            store.answer_member_offer(public, group="g", member="m", incarnation=INC)
        assert store.drops()[DropReason.BAD_KEY_EXCHANGE] == 1

    def test_secrets_never_show_in_repr(self) -> None:
        """Keys and member secrets do not leak into logs through repr."""
        store = Authenticator(KEY)
        _, secret = store.answer_member_offer(
            MemberOffer().public, group="g", member="m", incarnation=INC
        )
        assert secret.key.hex() not in repr(secret)
        assert "kkkk" not in repr(KEY)


class TestDropsAndLogging:
    def test_accept_counts_and_logs_once_per_reason_per_interval(
        self, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A flood of forgeries makes one log line per reason per interval, then a summary count."""
        ticks = Clock(0)
        log = RateLimitedLog(interval=timedelta(seconds=10), clock=ticks)
        _, receiver, _ = pair(log=log)
        with caplog.at_level(logging.WARNING, logger="dcps.wire.auth"):
            for _ in range(100):
                assert not receiver.accept("request/ping", "x", b"", b"junk", incarnation=INC)
            assert not receiver.accept("request/ping", "x", b"", b"", incarnation=INC)
            ticks.advance(10)
            assert not receiver.accept("request/ping", "x", b"", b"", incarnation=INC)
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2
        assert "malformed" in lines[0]
        assert "100 more" in lines[1]
        assert receiver.drops()[DropReason.MALFORMED] == 102

    def test_accept_returns_true_for_authentic_messages(self) -> None:
        """accept() passes authentic messages without counting a drop."""
        sender, receiver, _ = pair()
        trailer = sender.seal("reply", INC, b"ok", incarnation=INC)
        assert receiver.accept("reply", INC, b"ok", trailer, incarnation=INC)
        assert sum(receiver.drops().values()) == 0


class TestKeyFiles:
    def test_key_file_round_trip(self, tmp_path: Path) -> None:
        """A key file written by write_key_file loads back to the same key, mode 600."""
        path = tmp_path / "ns.key"
        written = write_key_file(path)
        assert os.stat(path).st_mode & 0o777 == 0o600
        loaded = load_key(path)
        assert loaded.secret == written.secret
        assert loaded.key_id == written.key_id
        assert loaded.source == str(path)

    def test_trailing_newline_and_spaces_do_not_change_the_key(self, tmp_path: Path) -> None:
        """An editor's trailing newline leaves the key as it was."""
        a, b = tmp_path / "a", tmp_path / "b"
        a.write_bytes(b"0123456789abcdef0123456789abcdef")
        b.write_bytes(b"0123456789abcdef0123456789abcdef\n")
        a.chmod(0o600)
        b.chmod(0o600)
        assert load_key(a).secret == load_key(b).secret

    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing key file is a KeyFileError naming the path."""
        path = tmp_path / "nope.key"
        with pytest.raises(KeyFileError, match="does not exist") as info:
            load_key(path)
        assert info.value.path == str(path)
        assert str(path) in str(info.value)
        assert isinstance(info.value, ValueError)

    def test_too_short(self, tmp_path: Path) -> None:
        """A key shorter than 32 bytes is refused, saying how long it is and how to make one."""
        path = tmp_path / "short.key"
        path.write_bytes(b"secret\n")
        path.chmod(0o600)
        with pytest.raises(KeyFileError, match=r"6-byte key; at least 32 .*openssl rand"):
            load_key(path)

    def test_directory(self, tmp_path: Path) -> None:
        """A directory given as key file is refused as such."""
        with pytest.raises(KeyFileError, match="is a directory") as info:
            load_key(tmp_path)
        assert info.value.path == str(tmp_path)

    def test_huge_file_is_not_a_key(self, tmp_path: Path) -> None:
        """A big file (a wrong path) is refused without reading it whole."""
        path = tmp_path / "big"
        path.write_bytes(b"x" * 100_000)
        with pytest.raises(KeyFileError, match="more than a key"):
            load_key(path)

    @pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX, non-root")
    def test_unreadable_file(self, tmp_path: Path) -> None:
        """A key file the process may not read is refused naming the path."""
        path = tmp_path / "locked.key"
        path.write_bytes(b"k" * 32)
        path.chmod(0)
        with pytest.raises(KeyFileError, match="cannot be read"):
            load_key(path)

    @pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
    def test_group_readable_file_warns(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A key file others may read loads, with a warning naming the path and the fix."""
        path = tmp_path / "open.key"
        path.write_bytes(b"k" * 32)
        path.chmod(0o644)
        with caplog.at_level(logging.WARNING, logger="dcps.wire.auth"):
            load_key(path)
        messages = [r.getMessage() for r in caplog.records]
        assert any(str(path) in m and "chmod 600" in m for m in messages)

    def test_environment_variable(self, tmp_path: Path) -> None:
        """The key file can be named by DCPS_STORE_KEY_FILE; unset means no key."""
        path = tmp_path / "ns.key"
        key = write_key_file(path)
        assert key_from_environment(environ={}) is None
        found = key_from_environment(environ={"DCPS_STORE_KEY_FILE": str(path)})
        assert found is not None
        assert found.secret == key.secret

    def test_empty_environment_variable_is_an_error(self) -> None:
        """A set but empty variable is an error naming it, not a silent 'no authentication'."""
        with pytest.raises(KeyFileError, match="DCPS_STORE_KEY_FILE is set but empty"):
            key_from_environment(environ={"DCPS_STORE_KEY_FILE": ""})

    def test_accepted_keys_from_environment(self, tmp_path: Path) -> None:
        """Rotation keys come from an os.pathsep-separated list of files."""
        a, b = write_key_file(tmp_path / "a"), write_key_file(tmp_path / "b")
        env = {"DCPS_STORE_ACCEPTED_KEY_FILES": f"{tmp_path / 'a'}{os.pathsep}{tmp_path / 'b'}"}
        keys = accepted_keys_from_environment(environ=env)
        assert [k.secret for k in keys] == [a.secret, b.secret]
        assert accepted_keys_from_environment(environ={}) == ()

    def test_write_refuses_to_overwrite(self, tmp_path: Path) -> None:
        """write_key_file never replaces an existing key."""
        path = tmp_path / "ns.key"
        first = write_key_file(path)
        with pytest.raises(KeyFileError, match="already exists"):
            write_key_file(path)
        assert load_key(path).secret == first.secret
