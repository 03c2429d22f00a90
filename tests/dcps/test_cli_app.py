"""The root of the dcps command line: entry points, --version, --help, log levels."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from tests.support.cli import ROOT, cli_env, run_dcps

COMMANDS = {
    "ls": "--qos",
    "ps": "--timeout",
    "typeof": "TOPIC",
    "sub": "--count",
    "pub": "--wait-readers",
    "record": "--roll",
    "store": "--data",
    "topics": "--seconds",
    "version": "Print",
}


class TestEntryPoints:
    def test_version_option_prints_the_installed_version(self) -> None:
        """`dcps --version` prints the version of the installed distribution and exits 0."""
        result = run_dcps("--version")
        assert result.returncode == 0, result.stderr
        names = metadata.packages_distributions()["dcps"]
        assert result.stdout.strip() == f"dcps {metadata.version(names[0])}"

    def test_console_script_module_runs_the_same_app(self) -> None:
        """The installed ``dcps`` console script shows every command of ``python -m dcps``."""
        old = subprocess.run(
            [str(Path(sys.executable).with_name("dcps")), "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env=cli_env(),
            cwd=ROOT,
        )
        assert old.returncode == 0, old.stderr
        for command in COMMANDS:
            assert f" {command} " in old.stdout

    @pytest.mark.parametrize(("command", "mentions"), sorted(COMMANDS.items()))
    def test_every_command_has_help(self, command: str, mentions: str) -> None:
        """`dcps COMMAND --help` exits 0 and documents the command's own options."""
        result = run_dcps(command, "--help")
        assert result.returncode == 0, result.stderr
        assert mentions in result.stdout
        if command in ("ls", "ps", "typeof", "sub", "pub", "record"):
            for common in ("--json", "--domain", "--peer", "--interface", "--network-config"):
                assert common in result.stdout, f"{command} lacks {common}"


class TestLogging:
    def test_verbose_sends_info_of_dcps_loggers_to_stderr(self) -> None:
        """`-v` shows INFO records of every dcps logger on stderr; without it they stay quiet."""
        code = (
            "import logging, sys\n"
            "from dcps.cli import app\n"
            "app(sys.argv[1:], standalone_mode=False)\n"
            "logging.getLogger('dcps.store').info('store started on %s', 'somewhere')\n"
            "logging.getLogger('dcps.channels.subscriber').debug('a debug record')\n"
        )

        def run(*args: str) -> str:
            done = subprocess.run(
                [sys.executable, "-c", code, *args, "version"],
                capture_output=True,
                text=True,
                timeout=60,
                env=cli_env(),
            )
            assert done.returncode == 0, done.stderr
            return done.stderr

        assert "store started" not in run()
        verbose = run("-v")
        assert "INFO dcps.store: store started on somewhere" in verbose
        assert "a debug record" not in verbose
        assert "DEBUG dcps.channels.subscriber: a debug record" in run("-vv")
        assert "a debug record" in run("--log-level", "debug")
        assert "store started" not in run("--log-level", "ERROR", "-vv")

    def test_log_level_from_the_environment(self) -> None:
        """DCPS_LOG_LEVEL sets the level when --log-level is not given."""
        code = (
            "import logging, sys\n"
            "from dcps.cli import app\n"
            "app(['version'], standalone_mode=False)\n"
            "print(logging.getLevelName(logging.getLogger('dcps').level))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env=cli_env(DCPS_LOG_LEVEL="info"),
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.split()[-1] == "INFO"

    def test_unknown_log_level_is_a_usage_error(self) -> None:
        """`--log-level LOUD` fails with a usage message naming the option and the levels."""
        result = run_dcps("--log-level", "LOUD", "version")
        assert result.returncode == 2
        assert "--log-level" in result.stderr
        assert "DEBUG" in result.stderr
