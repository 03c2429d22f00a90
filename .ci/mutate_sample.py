"""A sampled mutation run: ``./dev mutate --sample N`` (docs/mutation.md, issue 20).

Run by ``dev`` inside a module's scratch copy (``.mutmut/sample-<module>/``), with the
module and its tests already in the copy's ``[tool.mutmut]``. mutmut makes every mutant
of the module as a full run does (the same names: a mutant's number counts the mutants
before it in its function), then only ``N`` of them, picked with ``random.Random(seed)``
from the sorted names, are tested. A picked mutant that the tests do not catch (it
survived, or no test covers it) fails the run unless the module's list of known
survivors (``.ci/mutation-survivors.txt``, one name per line, its reason after ``#``)
names it. Time-outs count as caught, as in the scores of docs/mutation.md.

Arguments: ``count seed survivors-file jobs``. Uses mutmut 3.8.1's own run loop
(``mutmut.__main__._run``, pinned by the ``mutate`` extra), sampling the mutants it
collects.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from mutmut import __main__ as mutmut_main
from mutmut.stats import status_by_exit_code

#: statuses of a mutant the tests caught
CAUGHT = {"killed", "timeout", "segfault", "caught by type check"}


def known_survivors(path: Path) -> set[str]:
    """The mutant names listed in ``path`` (text after ``#`` is the reason)."""
    names = set()
    for line in path.read_text().splitlines():
        name = line.split("#", 1)[0].strip()
        if name:
            names.add(name)
    return names


def main(argv: list[str]) -> int:
    count, seed, survivors, jobs = int(argv[1]), int(argv[2]), Path(argv[3]), int(argv[4])
    known = known_survivors(survivors)
    collect = mutmut_main.collect_source_file_mutation_data
    picked: list[str] = []

    def sample(*, mutant_names: Any) -> Any:
        mutants, by_path = collect(mutant_names=())
        names = sorted(name for _, name, _ in mutants)
        picked[:] = sorted(random.Random(seed).sample(names, min(count, len(names))))
        print(f"sampled {len(picked)} of {len(names)} mutants (seed {seed})")
        return [m for m in mutants if m[1] in picked], by_path

    mutmut_main.collect_source_file_mutation_data = sample  # type: ignore[assignment]
    # "*" names every mutant, so each picked one is run again even if a run before
    # left a result; the clean run covers the tests of every function
    mutmut_main._run(("*",), jobs)
    mutants, _ = collect(mutant_names=())
    status = {name: status_by_exit_code[code] for _, name, code in mutants}
    missed = [name for name in picked if status[name] not in CAUGHT and name not in known]
    caught = sum(status[name] in CAUGHT for name in picked)
    listed = sum(status[name] not in CAUGHT and name in known for name in picked)
    print(f"sample: {caught} caught, {listed} known survivors, {len(missed)} not caught")
    for name in missed:
        print(f"NOT CAUGHT ({status[name]}): {name}  (mutmut show {name})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
