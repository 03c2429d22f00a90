"""A process running a durability service for every topic: argv data_dir domain namespace mode.

``mode`` ``store`` (default): a store with ``durability=("*",)`` (``run_store``
prints ``dcps store ready``); ``service``: a standalone DurabilityService on
``data_dir`` (prints ``durability ready`` once aligned with the others).
Stops on SIGTERM or stdin closing, or dies on kill -9.
"""

from __future__ import annotations

import sys

from dcps.store import DurabilityService, SyncMode, run_store


def main() -> None:
    data_dir, domain = sys.argv[1:3]
    namespace = sys.argv[3] if len(sys.argv) > 3 else "dcps"
    mode = sys.argv[4] if len(sys.argv) > 4 else "store"
    if mode == "store":
        run_store(
            data_dir,
            domain_id=int(domain),
            namespace=namespace,
            durability=("*",),
            sync=SyncMode.NORMAL,
        )
        return
    with DurabilityService(domain_id=int(domain), namespace=namespace, data_dir=data_dir) as svc:
        svc.wait_aligned(30)
        print(f"durability ready aligned={svc.aligned}", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
