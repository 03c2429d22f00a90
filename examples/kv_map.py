"""Key-value map demo: shared configuration in the store, with revisions, CAS and a watch.

A store is embedded in this process. Two clients open the map ``settings``: one
writes, the other watches every change as it happens. Compare-and-set keeps
two writers from overwriting each other; ``drop`` deletes the whole map.

    python -m examples.kv_map
"""

from __future__ import annotations

import argparse
import os
import tempfile
import uuid

if not any(name.startswith("DCPS_") for name in os.environ):  # stay on loopback
    os.environ["DCPS_INTERFACES"] = "lo"
    os.environ["DCPS_MULTICAST_INTERFACES"] = "lo"

import idl
from dcps.durables._map import KeyValueMap, MapOperation, RevisionMismatchError
from dcps.store import Store, SyncMode


class Setting(idl.Struct, typename="demo::Setting"):
    """One configuration value and who set it."""

    value: idl.bounded_str[64]
    set_by: idl.bounded_str[16]


def main(argv: list[str] | None = None) -> None:
    """Run the demo and print what each step did."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    args = parser.parse_args(argv)
    namespace = f"kv_{uuid.uuid4().hex[:8]}"
    where = {"domain_id": args.domain, "namespace": namespace}
    with (
        tempfile.TemporaryDirectory() as data,
        Store(data, sync=SyncMode.NORMAL, **where),
        KeyValueMap("settings", Setting, **where) as alice,
        KeyValueMap("settings", Setting, **where) as bob,
        bob.watch(updates_only=True) as watch,
    ):
        rev = alice.put("log.level", Setting("info", "alice"))
        print(f"alice put log.level=info at revision {rev}")
        print(f"bob reads log.level={bob['log.level'].value}")

        entry = bob.entry("log.level")
        assert entry is not None
        bob.update("log.level", Setting("debug", "bob"), entry.revision)
        print(f"bob raised log.level to debug (compare-and-set from revision {entry.revision})")
        try:
            alice.update("log.level", Setting("warning", "alice"), rev)
        except RevisionMismatchError as exc:
            print(f"alice's stale update refused: revision {exc.expected} != {exc.actual}")

        alice.put_many({"db.host": Setting("db1", "alice"), "db.port": Setting("5432", "alice")})
        del alice["db.port"]
        print("keys:", ", ".join(bob.keys()))

        alice.drop()
        for _ in range(6):  # every change, in order
            change = watch.get(10)
            shown = "" if change.value is None else f"={change.value.value}"
            what = "whole map" if change.operation is MapOperation.DROP else change.key
            print(f"watch: revision {change.revision} {change.operation.value} {what}{shown}")
        print("after drop:", list(bob.keys()))


if __name__ == "__main__":
    main()
