"""Docs that run: every Python snippet and every dcps command in README.md and docs/.

Python: the ```python blocks of one document run in order, in one fresh
interpreter, as a reader would paste them one after another (a later block may
use what an earlier one defined), in a temporary directory. Each document gets
its own DDS discovery ports, so the snippets' domain 0 meets no other test.

Shell: each ``dcps ...`` or ``python -m dcps...`` command line in a ```sh block
is parsed by the real command line with ``--help`` added: an unknown command,
option or choice fails. Commands with effects outside a temporary directory
(``./dev``, ``pip``) are not run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.S | re.M)
pytestmark = pytest.mark.multiprocess


def blocks(path: Path, *languages: str) -> list[tuple[int, str]]:
    """The code blocks of ``path`` in one of ``languages``, with their first line number."""
    text = path.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start()) + 2, m.group(2))
        for m in FENCE.finditer(text)
        if m.group(1) in languages
    ]


def shell_commands(path: Path) -> list[tuple[int, list[str]]]:
    """The ``dcps`` command lines of the shell blocks (continuations joined, env set dropped)."""
    found = []
    for line_no, body in blocks(path, "sh", "bash", "console"):
        joined = body.replace("\\\n", " ")
        for offset, line in enumerate(joined.splitlines()):
            line = line.split(" #", 1)[0].strip().removeprefix("$ ").removeprefix("# or: ")
            words = shlex.split(line) if line and not line.startswith("#") else []
            while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
                words.pop(0)  # VAR=value prefixes
            module = words[2] if words[:2] == ["python", "-m"] and len(words) > 2 else ""
            if words[:1] == ["dcps"] or module == "dcps" or module.startswith("dcps."):
                found.append((line_no + offset, words))
    return found


def discovery_env(index: int) -> dict[str, str]:
    """Loopback only, and discovery ports of this document's own (domain 0 maps elsewhere)."""
    base = 7400 + 250 * (60 + index)  # Cyclone: ports = base + 250 * domain + ...
    uri = (
        '<CycloneDDS><Domain id="any"><General><Interfaces>'
        '<NetworkInterface name="lo" multicast="true"/></Interfaces></General>'
        f"<Discovery><Ports><Base>{base}</Base></Ports></Discovery></Domain></CycloneDDS>"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("DCPS_")}
    env["CYCLONEDDS_URI"] = uri
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return env


PYTHON_DOCS = [p for p in DOCUMENTS if blocks(p, "python")]
SHELL_LINES = [(p, n, words) for p in DOCUMENTS for n, words in shell_commands(p)]


class TestPythonSnippets:
    @pytest.mark.parametrize("path", PYTHON_DOCS, ids=lambda p: p.name)
    @pytest.mark.timeout(330)  # the run below may take its 300 s (Spark on a loaded host)
    def test_every_python_block_runs(self, path: Path, tmp_path: Path) -> None:
        """The document's Python blocks run in order, in one interpreter, without an error."""
        program = []
        for line_no, code in blocks(path, "python"):
            program.append(f"# --- {path.name}:{line_no}\n{code}")
        script = tmp_path / f"{path.stem}_snippets.py"
        script.write_text("\n".join(program), encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=discovery_env(DOCUMENTS.index(path)),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{path.name}: {done.stderr[-3000:]}"


class TestShellCommands:
    def test_the_documents_show_commands(self) -> None:
        """The collector finds the commands the README shows (it is not checking nothing)."""
        assert any(words[:2] == ["dcps", "store"] for _, _, words in SHELL_LINES)

    @pytest.mark.parametrize(
        ("path", "line_no", "words"),
        SHELL_LINES,
        ids=[f"{p.name}:{n}" for p, n, _ in SHELL_LINES],
    )
    def test_command_line_parses(self, path: Path, line_no: int, words: list[str]) -> None:
        """The documented command, flags and values parse (``--help`` stops before it runs)."""
        if words[0] == "dcps":  # the installed console script, as a user runs it
            argv = [str(Path(sys.executable).with_name("dcps")), *words[1:]]
        else:
            argv = [sys.executable, *words[1:]]
        done = subprocess.run(
            [*argv, "--help"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{path.name}:{line_no}: {shlex.join(words)}\n{done.stderr}"
        assert "Usage" in done.stdout
