"""The built wheel holds the whole product: a wrong package layout fails here.

The wheel is built from the checkout and installed into a fresh virtual
environment that sees the test environment's third-party packages (so no
download is needed) but not the checkout: every module of ``idl``, ``qos`` and
``dcps`` must import from the installed copy, the typing markers and data files
must be there, and the ``dcps`` command must start.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("idl", "qos", "dcps")
pytestmark = pytest.mark.slow

#: Imports every module of the installed packages, from a directory outside the
#: checkout, and prints where each package came from (pyspark-only modules are
#: imported too: the test environment has pyspark).
CHECK = """
import importlib, json, pkgutil, sys
out = {}
for name in sys.argv[1:]:
    package = importlib.import_module(name)
    out[name] = package.__file__
    for info in pkgutil.walk_packages(package.__path__, name + "."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
print(json.dumps(out))
"""


def source_modules() -> set[str]:
    """The modules of the checkout's packages, as dotted names."""
    names = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of the checkout (offline: no build isolation).

    A copy, without ``build/`` and ``*.egg-info``: setuptools reuses what an earlier
    build left there, which would hide a package the layout no longer includes.
    """
    source = tmp_path_factory.mktemp("source") / "checkout"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".mutmut"
        ),
    )
    out = tmp_path_factory.mktemp("wheel")
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    subprocess.run(
        [*pip, "-w", str(out), str(source)], check=True, capture_output=True, timeout=300
    )
    (built,) = out.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel installed; third-party packages come from this one's."""
    home = tmp_path_factory.mktemp("venv")
    venv.EnvBuilder(with_pip=False).create(home)
    python = home / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # the test environment's packages; a directory named in a .pth file has its own
    # .pth files ignored, so the editable install of the checkout does not come along
    Path(site, "test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return python


def clean_env() -> dict[str, str]:
    """This environment without the variables that could point Python at the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


class TestWheel:
    def test_wheel_holds_every_module_typing_marker_and_data_file(self, wheel: Path) -> None:
        """Every module of the checkout, each package's py.typed, the QoS profiles, the licence."""

        with zipfile.ZipFile(wheel) as archive:
            names = set(archive.namelist())
        in_wheel = {
            ".".join(Path(n).with_suffix("").parts).removesuffix(".__init__")
            for n in names
            if n.endswith(".py")
        }
        assert source_modules() <= in_wheel, sorted(source_modules() - in_wheel)
        assert {f"{p}/py.typed" for p in PACKAGES} <= names
        assert "qos/profiles.toml" in names
        assert any(n.endswith("licenses/LICENSE") for n in names)
        assert wheel.name.startswith("dcps_cyclone-")

    def test_installed_wheel_imports_everything_from_itself(
        self, installed: Path, tmp_path: Path
    ) -> None:
        """In a fresh venv, outside the checkout, every module imports from the installed copy."""
        done = subprocess.run(
            [str(installed), "-c", CHECK, *PACKAGES],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        where = json.loads(done.stdout)
        for package in PACKAGES:
            assert not where[package].startswith(str(ROOT)), where
            assert "site-packages" in where[package], where

    def test_installed_command_line_starts(self, installed: Path, tmp_path: Path) -> None:
        """The installed distribution's ``dcps`` entry point answers --help."""
        script = installed.parent / "dcps"
        site = subprocess.run(
            [str(installed), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        command = [str(script)] if script.exists() else [str(Path(site, "bin", "dcps"))]
        done = subprocess.run(
            [str(installed), *command, "--help"],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert "store" in done.stdout
