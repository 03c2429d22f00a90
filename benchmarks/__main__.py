"""Run the benchmarks: every ``benchmarks/bench_*.py``, or those named.

Usage::

    python -m benchmarks                      # all of them, one after another
    python -m benchmarks pubsub filter        # bench_pubsub.py and bench_filter.py
    python -m benchmarks --quick              # smoke run (see below)
    python -m benchmarks pubsub -- --runs 9   # arguments after -- go to each benchmark
    python -m benchmarks --list

Each benchmark runs in its own process (``python -m benchmarks.bench_<name>``),
so one that crashes does not stop the others; the exit code is nonzero if any
failed. ``--quick`` passes a benchmark the arguments in its module-level
``QUICK_ARGS`` list (``bench_pubsub`` has ``["--quick"]``); a benchmark without
``QUICK_ARGS`` runs with its defaults.
"""

import argparse
import ast
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def available() -> dict[str, Path]:
    """Benchmark names (``bench_<name>.py`` without the prefix) and their files, sorted."""
    return {p.stem.removeprefix("bench_"): p for p in sorted(HERE.glob("bench_*.py"))}


def quick_args(path: Path) -> list[str] | None:
    """The module's ``QUICK_ARGS`` (read without importing it), or None if it has none."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value
            else []
        )
        if any(isinstance(t, ast.Name) and t.id == "QUICK_ARGS" for t in targets):
            value = ast.literal_eval(node.value)  # type: ignore[arg-type]
            return [str(v) for v in value]
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks; returns the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    found = available()
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description=__doc__.splitlines()[0],
        epilog="benchmarks: " + ", ".join(found),
    )
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="benchmarks to run (default: all), e.g. pubsub filter",
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: each benchmark's QUICK_ARGS"
    )
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, path in found.items():
            doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
            print(f"{name:12} {doc.splitlines()[0] if doc else ''}")
        return 0
    names = [n.removeprefix("bench_").removesuffix(".py") for n in args.names] or list(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(found)}")
    failed = []
    for name in names:
        cmd = [sys.executable, "-m", f"benchmarks.bench_{name}"]
        if args.quick:
            cmd += quick_args(found[name]) or []
        cmd += extra
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        started = time.monotonic()
        code = subprocess.call(cmd, cwd=HERE.parent)
        print(
            f"== {name}: {'ok' if code == 0 else f'FAILED (exit {code})'} "
            f"in {time.monotonic() - started:.0f} s\n",
            flush=True,
        )
        if code != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
