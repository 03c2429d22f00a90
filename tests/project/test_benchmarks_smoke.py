"""The benchmarks run as documented: ``python -m benchmarks pubsub --quick`` (no timings)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_benchmarks(*args: str, timeout: float = 100) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks", *args],
        cwd=ROOT,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
@pytest.mark.multiprocess
class TestPubSubQuick:
    def test_quick_run_reports_both_implementations(self, domain_id: int, tmp_path: Path) -> None:
        """A --quick run completes and reports nonzero throughput and latency for dcps and raw."""
        out_json = tmp_path / "results.json"
        result = run_benchmarks(
            "pubsub",
            "--quick",
            "--",
            "--domain",
            str(domain_id),
            "--json",
            str(out_json),
            timeout=110,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        for label in ("small keyed", "4 KiB keyed"):
            rows = [line.removeprefix(label).split() for line in lines if line.startswith(label)]
            assert {row[0] for row in rows} == {"raw", "dcps"}, result.stdout
            assert all(float(row[1].replace(",", "")) > 0 for row in rows), result.stdout
        assert "ratio" in result.stdout
        results = json.loads(out_json.read_text())
        for case in results["cases"].values():
            for impl in ("raw", "dcps"):
                r = case["impls"][impl]
                assert r["samples_per_s"] > 0
                assert r["mb_per_s"] > 0
                assert r["p50_us"] > 0
                assert r["p99_us"] >= r["p50_us"]


@pytest.mark.slow
@pytest.mark.multiprocess
class TestReadersQuick:
    def test_quick_run_reports_every_reader_kind_in_both_cases(self, domain_id: int) -> None:
        """A --quick readers run completes and prints a positive figure for each reader kind."""
        result = run_benchmarks("readers", "--quick", "--", "--domain", str(domain_id), timeout=170)
        assert result.returncode == 0, result.stdout + result.stderr
        lines = result.stdout.splitlines()
        for title in ("streaming", "prefilled: take loop CPU", "prefilled: reader process CPU"):
            start = next(i for i, line in enumerate(lines) if line.startswith(title))
            rows = lines[start + 2 : start + 7]
            assert [row.split("  ")[0] for row in rows] == [
                "raw cyclonedds",
                "dcps plain",
                "dcps SubscriptionKeys",
                "dcps SubscriptionKeys+limits",
                "dcps content-filtered*",
            ], result.stdout
            assert all(float(row.split()[-3].replace(",", "")) > 0 for row in rows), result.stdout


@pytest.mark.slow
@pytest.mark.multiprocess
class TestMapsQuick:
    def test_quick_run_reports_maps_queues_and_the_raw_reference(self, domain_id: int) -> None:
        """A --quick maps run reports get/put latency, put and queue rates, and the raw
        binding's round trip, each positive."""
        result = run_benchmarks("maps", "--quick", "--", "--domain", str(domain_id), timeout=240)
        assert result.returncode == 0, result.stdout + result.stderr
        out = result.stdout
        for label in ("map get", "map put", "raw binding request/reply"):
            line = next(x for x in out.splitlines() if x.startswith(label))
            assert float(line.split("p50")[1].split()[0].replace(",", "")) > 0, line
        for label in ("map pipelined puts", "queue, 4 consumers"):
            line = next(x for x in out.splitlines() if x.startswith(label))
            rate = re.search(r"([\d,]+) (puts|elements)/s", line)
            assert rate is not None, line
            assert int(rate.group(1).replace(",", "")) > 0, line


@pytest.mark.slow
@pytest.mark.multiprocess
class TestSizesQuick:
    def test_quick_run_reports_every_path_and_the_disk(
        self, domain_id: int, tmp_path: Path
    ) -> None:
        """A --quick sizes run reports a positive rate for every path and size, and disk speed."""
        out_json = tmp_path / "sizes.json"
        result = run_benchmarks(
            "sizes",
            "--quick",
            "--",
            "--domain",
            str(domain_id),
            "--json",
            str(out_json),
            timeout=240,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        results = json.loads(out_json.read_text())
        assert all(mb > 0 for mb in results["disk_mb_s"]), results["disk_mb_s"]
        paths = {"raw", "dcps", "ddsperf"} | {
            f"store {m} {w}" for m in ("conf", "unconf") for w in ("anon", "group4")
        }
        assert set(results["medians"]) == {"64B", "4KiB", "1MiB"}, result.stdout
        for size, cases in results["medians"].items():
            assert set(cases) == paths, (size, result.stdout)
            assert all(c["rate"] > 0 and c["mb_s"] > 0 for c in cases.values()), result.stdout
            assert all(cases[p]["disk_written"] > 0 for p in paths if p.startswith("store"))
        for path, runs in results["latency_ms"].items():  # one entry per latency run
            assert runs, path
            for lat in runs:
                assert 0 < lat["p50"] <= lat["p99"] <= lat["p999"], (path, lat)


@pytest.mark.slow
@pytest.mark.multiprocess
class TestMultihostQuick:
    def test_quick_run_measures_one_host_and_namespaces(self, domain_id: int) -> None:
        """A --quick multihost run reports a positive rate for every plain and channelled
        case, the network-namespace hosts included (it once failed on a moved import)."""
        result = run_benchmarks(
            "multihost", "--quick", "--", "--domain", str(domain_id), timeout=240
        )
        assert result.returncode == 0, result.stdout + result.stderr
        cases = [
            "dcps: one host (loopback)",
            "raw: one host (loopback)",
            "channels: one host (loopback)",
        ]
        if "skipped" not in result.stderr:  # no network namespaces here (not root)
            cases += ["dcps: two hosts (netns)", "channels: three hosts (store|pub|sub)"]
        for case in cases:
            rows = [line for line in result.stdout.splitlines() if line.startswith(case)]
            assert rows, (case, result.stdout)
            rate = float(rows[0].removeprefix(case).split()[0].replace(",", ""))
            assert rate > 0, (case, result.stdout)


class TestRunner:
    def test_list_names_every_benchmark(self) -> None:
        """--list shows each bench_*.py module by its short name."""
        result = run_benchmarks("--list", timeout=30)
        assert result.returncode == 0, result.stderr
        names = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
        expected = {p.stem.removeprefix("bench_") for p in (ROOT / "benchmarks").glob("bench_*.py")}
        assert "pubsub" in names
        assert names == expected

    def test_unknown_name_is_refused(self) -> None:
        """An unknown benchmark name fails with the list of available ones and runs nothing."""
        result = run_benchmarks("nosuchbench", timeout=30)
        assert result.returncode == 2
        assert "nosuchbench" in result.stderr
        assert "pubsub" in result.stderr
        assert "==" not in result.stdout
