"""Benchmarks: each ``bench_<name>.py`` is a program of its own (see README.md).

Traffic stays on this machine: unless the caller set ``CYCLONEDDS_URI``,
Cyclone DDS is pinned to the loopback interface here, before any benchmark
module imports it (``python -m benchmarks.bench_x`` imports this package first).
"""

import os

#: Cyclone configuration of the benchmarks unless ``CYCLONEDDS_URI`` is set.
LOOPBACK_URI = (
    '<CycloneDDS><Domain id="any"><General><Interfaces>'
    '<NetworkInterface name="lo" multicast="true"/>'
    "</Interfaces></General></Domain></CycloneDDS>"
)
os.environ.setdefault("CYCLONEDDS_URI", LOOPBACK_URI)
