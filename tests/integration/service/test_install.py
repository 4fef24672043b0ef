"""The documented production install (docs/operators.md, "Install"): tools/install.sh into a
fresh virtualenv, the unit it installs verified by ``systemd-analyze verify`` with ExecStart=
and Documentation= pointing at files the install made.

pip builds asyncsched in an isolated build environment (setuptools from the package index, as
on a real install); ``--no-deps`` keeps the run to seconds: the dependencies are pip's job and
the rest of the suite runs against them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def unit_value(text: str, key: str) -> str:
    (value,) = [line.split("=", 1)[1] for line in text.splitlines() if line.startswith(f"{key}=")]
    return value


def test_install_sh_gives_a_unit_systemd_accepts(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed: run tools/services.sh (make test does)"
    prefix, units = tmp_path / "opt" / "asyncsched", tmp_path / "units"
    units.mkdir()
    env = dict(os.environ, PREFIX=str(prefix), UNIT_DIR=str(units), PIP_OPTS="--no-deps")
    env.pop("PYTHONPATH", None)  # the installed package, not this tree
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.run(
        [str(ROOT / "tools" / "install.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = (units / "asyncsched.service").read_text()
    exe = unit_value(text, "ExecStart").split()[0]
    assert exe == f"{prefix}/bin/asyncsched" and os.access(exe, os.X_OK)
    doc = Path(unit_value(text, "Documentation").removeprefix("file://"))
    assert doc.is_file() and doc.read_text() == (ROOT / "docs" / doc.name).read_text()
    assert (prefix / "share/doc/asyncsched/asyncsched.conf.minimal").is_file()
    verify = subprocess.run(
        [analyze, "verify", str(units / "asyncsched.service")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    output = (verify.stdout + verify.stderr).strip()
    assert verify.returncode == 0, output
    assert "asyncsched.service" not in output, output  # unknown keys are only warnings
