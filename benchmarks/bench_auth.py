"""The cost of authentication: 64 B channel throughput with and without a namespace key.

Run: ``python -m benchmarks.bench_auth [--quick] [--runs N] [--count N] [--micro]``.

Two store processes (``python -m dcps.store``, synchronous=NORMAL) run side by
side on loopback, one in a namespace with a key (``DCPS_STORE_KEY_FILE``) and
one without; the cases alternate in every run (one publisher, confirmed, to an
anonymous subscriber, 17 channels; the scenario of ``bench_channels.py``,
checked for loss; with a key the requests, replies and the live batches
the subscriber takes are sealed). Printed: the median msgs/s of each, the CPU
us per message of this process and of the store, the ratio keyed/plain of the
medians (target >= 0.9), the median of the per-run ratios (each keyed run
against the plain run just before it: less sensitive to a load that drifts),
the same ratio of the CPU each message costs in this process (publisher and
subscriber: the bottleneck, one GIL) and in the store, which a loaded host
changes far less than the rates, and the load average. ``--micro``: also
the CPU cost of sealing and opening one message of each kind (64 and 400
elements of 64 B; this scenario's publish requests and live batches hold
300-500), which a loaded host hardly disturbs.
"""

import argparse
import logging
import os
import statistics
import tempfile
import timeit
import uuid
from pathlib import Path

from benchmarks._store_process import StoreProcess
from benchmarks.bench_channels import channel_throughput
from dcps.wire._auth import Authenticator
from dcps.wire._auth_keys import KEY_FILE_ENV, StoreKey, write_key_file
from dcps.wire._messages import LiveBatch, Reply, Request
from dcps.wire._requests import PublishRequest
from dcps.wire._sealing import Sealer


def _with_key(key_file: str | None) -> None:
    """Make the processes started next, and the clients made next, use ``key_file`` (or none)."""
    if key_file is None:
        os.environ.pop(KEY_FILE_ENV, None)
    else:
        os.environ[KEY_FILE_ENV] = key_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "43"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer messages")
    parser.add_argument("--runs", type=int, default=3, help="runs per case (median; >= 3)")
    parser.add_argument("--count", type=int, help="messages per run (default 200,000)")
    parser.add_argument("--micro", action="store_true", help="also time seal/open per message")
    args = parser.parse_args()
    if args.micro:
        for elements in (64, 400):
            micro(elements)
    load_before = os.getloadavg()
    count = args.count or (50_000 if args.quick else 200_000)
    domain = args.domain
    with tempfile.TemporaryDirectory(prefix="dcps-bench-key-") as tmp:
        key_file = str(write_key_file(Path(tmp) / "ns.key").source)
        cases = {"no key": None, "with key": key_file}
        stores: dict[str, tuple[StoreProcess, str]] = {}
        try:
            for name, key in cases.items():
                _with_key(key)
                namespace = f"bench_auth_{uuid.uuid4().hex[:8]}"
                stores[name] = (StoreProcess(domain, namespace), namespace)
            results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in cases}
            for name, key in cases.items():  # warm-up, not measured
                _with_key(key)
                store, namespace = stores[name]
                channel_throughput(store, domain, namespace, 64, 10_000, confirmed=True, members=0)
            for _ in range(args.runs):
                for name, key in cases.items():
                    _with_key(key)
                    store, namespace = stores[name]
                    results[name].append(
                        channel_throughput(
                            store, domain, namespace, 64, count, confirmed=True, members=0
                        )
                    )
        finally:
            _with_key(None)
            for store, _ in stores.values():
                store.close()
    print(f"64 B, confirmed, anonymous subscriber, {count:,} msgs; median of {args.runs} runs")
    print(f"{'case':<12}{'msgs/s':>12}{'cpu us/msg':>12}{'store':>8}   runs (msgs/s)")
    medians = {}
    for name, values in results.items():
        rate = medians[name] = statistics.median(r for r, _, _ in values)
        cpu = statistics.median(c for _, c, _ in values)
        store_cpu = statistics.median(s for _, _, s in values)
        runs = ", ".join(f"{r:,.0f}" for r, _, _ in values)
        print(f"{name:<12}{rate:>12,.0f}{cpu:>12.2f}{store_cpu:>8.2f}   {runs}")
    ratio = medians["with key"] / medians["no key"]
    print(f"with key / no key: {ratio:.2f}x (target >= 0.90)")
    paired = [k[0] / p[0] for p, k in zip(results["no key"], results["with key"], strict=True)]
    print(
        f"per-run ratios: {', '.join(f'{r:.2f}' for r in paired)}; "
        f"median {statistics.median(paired):.2f}x"
    )
    # The CPU a message costs hardly depends on the load, the rate does: what the rate
    # ratio would be on a quiet host where this process (one GIL) is the bottleneck
    pairs = list(zip(results["no key"], results["with key"], strict=True))
    client = statistics.median(p[1] / k[1] for p, k in pairs)
    store = statistics.median(p[2] / k[2] for p, k in pairs)
    print(
        f"CPU per message, no key / with key (per-run pairs, median): {client:.2f}x here, "
        f"{store:.2f}x in the store"
    )
    load_after = os.getloadavg()
    print(f"load average (1 min) before {load_before[0]:.1f}, after {load_after[0]:.1f}")


def micro(elements: int = 64, size: int = 64) -> None:
    """Print the CPU us of sealing and of opening one request, reply and live batch."""
    logging.getLogger("dcps.wire.auth").setLevel(logging.ERROR)
    incarnation = uuid.uuid4().hex
    sealer = Sealer(Authenticator(StoreKey(os.urandom(32))))
    sizes, blob = [size] * elements, os.urandom(size * elements)
    request = PublishRequest("bench", 3, sizes, blob).to_wire(uuid.uuid4().hex, 1)
    reply = Reply(client=request.client, request_id=1, offsets=[7], stamps=[1], number=1)
    batch = LiveBatch(topic="bench", channel=3, first=7, timestamp=1, sizes=sizes, blob=blob)

    def best(f: object, n: int = 10) -> float:
        # many short repeats: on a loaded host some fall between preemptions
        return min(timeit.repeat(f, number=n, repeat=300)) / n * 1e6  # type: ignore[arg-type]

    print(f"seal/open CPU per message ({elements} elements of {size} B; best of 300):")
    cases = [
        ("request", lambda: request.serialize(), lambda: sealer.seal_request(request, incarnation)),
        ("reply", lambda: reply.serialize(), lambda: sealer.seal_reply(reply, incarnation)),
        ("live batch", lambda: batch.serialize(), lambda: sealer.seal_live(batch, incarnation)),
    ]
    for name, plain, seal in cases:
        print(f"  {name:<11} serialise {best(plain):6.2f} us, serialise+seal {best(seal):6.2f} us")
    # opening: fresh messages each time (a replayed one takes the refusal path)
    opener = Sealer(Authenticator(sealer.auth.key if sealer.auth else StoreKey(b"")))
    batches = iter(
        [LiveBatch.deserialize(sealer.seal_live(batch, incarnation)) for _ in range(3000)]
    )
    requests = iter(
        [Request.deserialize(sealer.seal_request(request, incarnation)) for _ in range(3000)]
    )
    live = best(lambda: opener.accept_live(next(batches), incarnation, "bench", 3))
    print(f"  live batch  open (verify) {live:6.2f} us")
    opened = best(lambda: opener.open_request(next(requests), incarnation))
    print(f"  request     open (verify) {opened:6.2f} us")


if __name__ == "__main__":
    main()
