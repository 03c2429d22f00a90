"""Evaluation rate of a compiled content filter.

Run: ``python -m benchmarks.bench_filter [--samples N] [--runs R]``. Prints the
median samples/s of ``matches`` (one call per sample) and ``matches_many``
(one call per batch) for ``x > %0 AND name LIKE 'abc%' OR color = RED`` over
pre-built samples, plus the one-off compile and parameter-rebind costs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import idl
from dcps.sql._compile import _compile_cached
from dcps.sql._filter import ContentFilter

EXPRESSION = "x > %0 AND name LIKE 'abc%' OR color = RED"


class BenchColor(idl.Enum, typename="bench::Color"):
    """Colours of the benchmark samples."""

    RED = 0
    GREEN = 1
    BLUE = 2


class BenchSample(idl.Struct, typename="bench::Sample"):
    """The benchmark topic type."""

    x: idl.int32
    name: str
    color: BenchColor


def make_samples(count: int, seed: int = 1) -> list[BenchSample]:
    """``count`` random samples (about a third of them match)."""
    rng = random.Random(seed)
    names = ["abcdef", "abc", "xyzabc", "ab", "abcabc", "zzz"]
    colors = list(BenchColor)
    return [
        BenchSample(rng.randrange(-1000, 1000), rng.choice(names), rng.choice(colors))
        for _ in range(count)
    ]


def _rate(run: object, count: int, runs: int) -> float:
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        run()  # type: ignore[operator]
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    """Run the benchmark and print its results."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=200_000)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()

    samples = make_samples(args.samples)
    start = time.perf_counter()
    content_filter = ContentFilter(EXPRESSION, BenchSample, parameters=("500",))
    compile_ms = (time.perf_counter() - start) * 1e3

    match = content_filter.matches

    def one_by_one() -> None:
        for sample in samples:
            match(sample)

    def batch() -> None:
        content_filter.matches_many(samples)

    single = _rate(one_by_one, len(samples), args.runs)
    many = _rate(batch, len(samples), args.runs)

    start = time.perf_counter()
    for i in range(1000):
        content_filter.set_parameters((str(i),))
    rebind_us = (time.perf_counter() - start) * 1e3

    _compile_cached.cache_clear()
    start = time.perf_counter()
    for _ in range(20):
        _compile_cached.cache_clear()
        ContentFilter(EXPRESSION, BenchSample, parameters=("500",))
    cold_ms = (time.perf_counter() - start) * 1e3 / 20

    print(f"expression: {EXPRESSION}  (%0 = 500), {len(samples)} samples, median of {args.runs}")
    print(f"matches:      {single:12,.0f} samples/s")
    print(f"matches_many: {many:12,.0f} samples/s")
    print(
        f"compile (first use, incl. grammar load): {compile_ms:.1f} ms; "
        f"compile (cold cache): {cold_ms:.2f} ms; rebind parameters: {rebind_us:.1f} us"
    )


if __name__ == "__main__":
    main()
