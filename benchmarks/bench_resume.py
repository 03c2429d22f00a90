"""Resume after a store kill -9 (issue 13 item 4): ready -> first confirmation, first delivery.

``python -m benchmarks.bench_resume [--restarts 5] [--domain 42] [--channels 4]
[--members 2] [--rate 400]``

A store process, a confirmed publisher publishing ``--rate`` samples/s, and
``--members`` members of one group, each committing what it receives; all
with default settings. The store is killed with SIGKILL under that load and
restarted on its data directory, ``--restarts`` times. For each restart it
measures, from the moment the new store printed "ready":

- ``confirm``: the first publish confirmed by the new store;
- ``deliver``: the first element delivered that no member had received before;
- ``rejoin``: a member that follows the StoreClient restart contract (restart
  listener, then ``join(previous_channels=...)``) has its channels back;

and counts, per restart, the publishes failed (e.g. "unknown outcome"),
elements delivered again although committed before the kill, elements
delivered again at all, and channels the contract member lost. Prints the
medians, one line each, so runs of two versions compare line by line. It only
uses the public API plus ``StoreClient``; on a version without the restart
contract the ``rejoin`` line says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.append(str(ROOT))  # last: PYTHONPATH picks the dcps under test

from benchmarks._store_process import StoreProcess  # noqa: E402
from dcps import DcpsError  # noqa: E402
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber  # noqa: E402
from dcps.channels._client import StoreClient  # noqa: E402
from dcps.wire._transport import Endpoint  # noqa: E402
from tests.support.peers.channels_types import Msg  # noqa: E402

QUICK_ARGS = ["--restarts", "1", "--rate", "100"]
#: The contract member's own group (it consumes nothing: the load's group must not wait for it).
CONTRACT_GROUP = "contract"
#: Longest wait (s) for the first confirmation and delivery after a restart.
PATIENCE = 40.0


class Load:
    """The publisher and the group members, recording what happens and when."""

    def __init__(self, topic: ChannelledTopic, members: int, rate: float, **kw: Any) -> None:
        self.lock = threading.Lock()
        self.confirmed: list[float] = []  # monotonic times of confirmations
        self.failed: list[tuple[float, str]] = []
        self.delivered: dict[tuple[int, int], int] = defaultdict(int)  # position -> count
        self.deliveries: list[tuple[float, int, int, int]] = []  # (time, channel, offset, count)
        self.committed: dict[int, int] = {}  # channel -> highest offset confirmed committed
        self.stop = threading.Event()
        self.pub: ChannelPublisher[Msg] = ChannelPublisher(topic, **kw)
        self.subs = [ChannelSubscriber(topic, group="g", **kw) for _ in range(members)]
        self.threads = [threading.Thread(target=self._publish, args=(rate,), daemon=True)]
        self.threads += [
            threading.Thread(target=self._consume, args=(s,), daemon=True) for s in self.subs
        ]
        for thread in self.threads:
            thread.start()

    def _publish(self, rate: float) -> None:
        seq = 0
        start = time.monotonic()
        while not self.stop.is_set():
            due = start + seq / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the load, not synchronising
            try:
                fut = self.pub.publish(Msg(seq % 64, seq, "x" * 64))
            except DcpsError as exc:
                with self.lock:
                    self.failed.append((time.monotonic(), type(exc).__name__))
                continue
            finally:
                seq += 1
            fut.add_done_callback(self._on_confirmed)

    def _on_confirmed(self, fut: Any) -> None:
        now = time.monotonic()
        exc = fut.exception()
        with self.lock:
            if exc is None:
                self.confirmed.append(now)
            else:
                self.failed.append((now, type(exc).__name__))

    def _consume(self, sub: ChannelSubscriber[Msg]) -> None:
        while not self.stop.is_set():
            try:
                got = sub.receive(256).result(1.0)
            except TimeoutError:
                continue
            except DcpsError:  # the store is away: the next receive waits again
                continue
            now = time.monotonic()
            last: dict[int, Any] = {}
            with self.lock:
                for e in got:
                    key = (e.position.channel, e.position.offset)
                    self.delivered[key] += 1
                    self.deliveries.append((now, key[0], key[1], self.delivered[key]))
                    last[key[0]] = e.position
            if not last:
                continue
            try:
                results = sub.commit(last)
            except DcpsError:
                continue
            with self.lock:
                for channel, result in results.items():
                    if result.status.name == "COMMITTED":
                        offset = last[channel].offset
                        self.committed[channel] = max(self.committed.get(channel, -1), offset)

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(15)
        for sub in self.subs:
            sub.close()
        self.pub.close()


class ContractMember:
    """A group member on a bare StoreClient that rejoins as the restart contract says."""

    def __init__(self, topic: str, endpoint: Endpoint) -> None:
        self.client = StoreClient(endpoint)
        self.client.connect(10)
        self.topic = topic
        self.channels: tuple[int, ...] = ()
        self.rejoined: list[tuple[float, tuple[int, ...]]] = []
        self.supported = hasattr(self.client, "add_restart_listener")
        if self.supported:
            self.client.add_restart_listener(self._on_restart)
        joined = self.client.join(topic, CONTRACT_GROUP, self.client.client_id, 30_000)
        self.channels = tuple(joined.channels)

    def _on_restart(self) -> None:
        fut = self.client.join_async(  # on the client's thread: must not wait here
            self.topic,
            CONTRACT_GROUP,
            self.client.client_id,
            30_000,
            previous_channels=self.channels,
        )

        def done(f: Any) -> None:
            if f.exception() is None:
                self.rejoined.append((time.monotonic(), tuple(f.result().channels)))

        fut.add_done_callback(done)

    def heartbeat(self) -> None:
        if self.channels:
            self.client.heartbeat_async(self.topic, CONTRACT_GROUP, self.client.client_id)

    def close(self) -> None:
        self.client.close()


def first_after(times: list[float], since: float) -> float | None:
    return next((t for t in sorted(times) if t >= since), None)


def run(args: argparse.Namespace) -> list[dict[str, float]]:
    namespace = "bench_" + os.urandom(4).hex()
    data = tempfile.mkdtemp(prefix="dcps-resume-")
    kw: dict[str, Any] = {"domain_id": args.domain, "namespace": namespace}
    store = StoreProcess(args.domain, namespace, data)
    topic = ChannelledTopic("resume", Msg, channel_count=args.channels, retain_consumed=True)
    load = Load(topic, args.members, args.rate, **kw)
    endpoint = Endpoint(args.domain, namespace)
    contract = ContractMember("resume", endpoint)
    rows: list[dict[str, float]] = []
    try:
        for _ in range(args.restarts):
            settle = time.monotonic() + 2.0
            while time.monotonic() < settle:  # steady state: deliveries flowing
                contract.heartbeat()
                time.sleep(0.2)
            with load.lock:
                committed = dict(load.committed)
                seen = set(load.delivered)
                before = {k: v for k, v in load.delivered.items()}
                failed_before = len(load.failed)
            store.kill()
            # what happens from here on is the new store's doing (the old one's last
            # replies were taken long before a new Python process is up)
            spawned = time.monotonic()
            store = StoreProcess(args.domain, namespace, data)
            ready = time.monotonic()
            deadline = ready + PATIENCE
            confirm = deliver = None
            while time.monotonic() < deadline and (confirm is None or deliver is None):
                with load.lock:
                    confirm = first_after(load.confirmed, spawned)
                    new = [
                        t for t, c, o, _ in load.deliveries if t >= spawned and (c, o) not in seen
                    ]
                    deliver = min(new, default=None)
                time.sleep(0.01)
            time.sleep(1.0)  # let redeliveries, if any, show
            with load.lock:
                again = sum(v - before.get(k, 0) for k, v in load.delivered.items() if k in before)
                again_committed = sum(
                    v - before[k]
                    for k, v in load.delivered.items()
                    if k in before and k[1] <= committed.get(k[0], -1)
                )
                failed = len(load.failed) - failed_before
            row = {
                "confirm": (confirm - ready) if confirm is not None else float("nan"),
                "deliver": (deliver - ready) if deliver is not None else float("nan"),
                "failed": failed,
                "again_committed": again_committed,
                "again": again,
            }
            if contract.rejoined:
                when, channels = contract.rejoined[-1]
                row["rejoin"] = when - ready
                row["lost"] = len(set(contract.channels) - set(channels))
                contract.rejoined.clear()
            rows.append(row)
            print("  restart: " + "  ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    finally:
        load.close()
        contract.close()
        endpoint.close()
        store.kill()
    return rows


def main() -> None:
    """Run ``--restarts`` restarts under load and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--restarts", type=int, default=5)
    parser.add_argument("--domain", type=int, default=42)
    parser.add_argument("--channels", type=int, default=4)
    parser.add_argument("--members", type=int, default=2)
    parser.add_argument("--rate", type=float, default=400.0)
    args = parser.parse_args()
    rows = run(args)

    def median(key: str) -> str:
        values = [r[key] for r in rows if key in r]
        return f"{statistics.median(values):8.3f}" if values else "     n/a"

    print(
        f"restarts {len(rows)}, {args.members} members, {args.channels} channels, "
        f"{args.rate:g}/s; medians:"
    )
    print(f"ready -> first confirmation  {median('confirm')} s")
    print(f"ready -> first delivery      {median('deliver')} s")
    if any("rejoin" in r for r in rows):
        print(
            f"ready -> contract rejoin     {median('rejoin')} s  "
            f"(channels lost: {median('lost').strip()})"
        )
    else:
        print("ready -> contract rejoin          n/a (no StoreClient restart listener)")
    print(f"publishes failed / restart   {median('failed')}")
    print(f"committed delivered again    {median('again_committed')}")
    print(f"delivered again (all)        {median('again')}")


if __name__ == "__main__":
    main()
