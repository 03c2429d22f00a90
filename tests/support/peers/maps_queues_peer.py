"""A peer process for the map and queue tests: a CAS racer, a queue consumer that holds.

    python -m tests.support.peers.maps_queues_peer cas --map M --key K --rounds N ...
    python -m tests.support.peers.maps_queues_peer hold --queue Q --count N ...

``cas``: increments ``Counter.value`` of key K N times with compare-and-set
(re-reading on every lost race), printing ``won REV`` per successful update
and ``done`` at the end. ``hold``: receives N elements without acknowledging
them, prints ``held SEQ,SEQ,...`` and waits to be killed.
"""

from __future__ import annotations

import argparse
import sys
import threading

import idl


class Counter(idl.Struct, typename="kvtest::Counter"):
    """A map value: a counter and who wrote it last."""

    value: idl.int64
    writer: idl.bounded_str[32]


class Task(idl.Struct, typename="kvtest::Task"):
    """A queue element."""

    n: idl.int64
    note: idl.bounded_str[32]


def _cas(args: argparse.Namespace) -> None:
    from dcps.durables._map import KeyValueMap, RevisionMismatchError

    with KeyValueMap(args.map, Counter, domain_id=args.domain, namespace=args.namespace) as m:
        print("ready", flush=True)
        sys.stdin.readline()  # start together with the other racers
        for _ in range(args.rounds):
            while True:
                entry = m.entry(args.key)
                assert entry is not None
                try:
                    rev = m.update(
                        args.key, Counter(entry.value.value + 1, args.name), entry.revision
                    )
                except RevisionMismatchError:
                    continue
                print(f"won {rev}", flush=True)
                break
        print("done", flush=True)


def _hold(args: argparse.Namespace) -> None:
    from dcps.durables._queue import QueueSubscriber

    sub = QueueSubscriber(
        args.queue,
        Task,
        domain_id=args.domain,
        namespace=args.namespace,
        timeout=args.timeout,
        consumer=args.name,
    )
    held: list[int] = []
    while len(held) < args.count:
        held += [e.seq for e in sub.receive(args.count - len(held), timeout=10)]
    print("held " + ",".join(map(str, held)), flush=True)
    threading.Event().wait()  # until killed


def main() -> None:
    """Run one peer role."""
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["cas", "hold"])
    parser.add_argument("--domain", type=int, required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--map", default="")
    parser.add_argument("--key", default="")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--queue", default="")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--name", default="peer")
    args = parser.parse_args()
    {"cas": _cas, "hold": _hold}[args.role](args)


if __name__ == "__main__":
    main()
