"""systemd/asyncsched.service: verified by systemd-analyze and checked for the contract keys."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsched.conf.options import Config

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "systemd" / "asyncsched.service"
PREFIX = "/opt/asyncsched"  # tools/install.sh's default, docs/operators.md's "Install"
INSTALLED = f"{PREFIX}/bin/asyncsched"


def unit_keys() -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, value = line.split("=", 1)
            keys.setdefault(key, []).append(value)
    return keys


def seconds(value: str) -> float:
    return float(value.removesuffix("s"))


def test_unit_declares_the_service_contract() -> None:
    keys = unit_keys()
    assert keys["Type"] == ["notify"]
    assert keys["NotifyAccess"] == ["main"]
    assert keys["Restart"] == ["on-failure"]
    assert keys["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert keys["User"] == ["asyncsched"]
    assert seconds(keys["WatchdogSec"][0]) > 0
    assert seconds(keys["TimeoutStopSec"][0]) > Config().asyncsched.drain_timeout
    assert keys["RestartPreventExitStatus"] == ["78"]  # cli.EX_CONFIG
    assert "serve" in keys["ExecStart"][0]
    for hardening, value in {
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "NoNewPrivileges": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectControlGroups": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    }.items():
        assert keys[hardening] == [value], hardening


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    # verify insists that ExecStart exists: point it at this venv's asyncsched.
    exe = Path(sys.executable).parent / "asyncsched"
    assert exe.exists()
    text = UNIT.read_text().replace(f"ExecStart={INSTALLED}", f"ExecStart={exe}")
    assert str(exe) in text
    unit = tmp_path / "asyncsched.service"
    unit.write_text(text)
    proc = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60
    )
    output = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 0, output
    # Unknown or misspelt keys are only warnings for verify: treat them as failures.
    assert "asyncsched.service" not in output, output


def test_exec_start_and_documentation_are_where_the_install_puts_them() -> None:
    keys = unit_keys()
    assert keys["ExecStart"][0].startswith(f"{INSTALLED} serve ")
    install = (ROOT / "tools" / "install.sh").read_text()
    assert f"PREFIX=${{PREFIX:-{PREFIX}}}" in install
    (doc,) = keys["Documentation"]
    # file:///opt/asyncsched/share/doc/asyncsched/NAME is docs/NAME, which install.sh copies.
    name = doc.removeprefix(f"file://{PREFIX}/share/doc/asyncsched/")
    assert name != doc and (ROOT / "docs" / name).is_file()
    assert f'docs/{name} "$PREFIX/share/doc/asyncsched/{name}"' in install


def process_metrics_under(proc_options: str) -> set[str]:
    """The process_* metric names prometheus_client exports in a private mount and PID
    namespace whose /proc is mounted as systemd mounts it for the unit."""
    script = (
        "from prometheus_client import REGISTRY, generate_latest; "
        "print(generate_latest(REGISTRY).decode())"
    )
    proc = subprocess.run(
        ["unshare", "--mount", "--pid", "--fork", "sh", "-c",
         'mount -t proc -o "$1" proc /proc && exec "$2" -c "$3"', "sh",
         proc_options, sys.executable, script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {
        line.split()[0].split("{")[0]
        for line in proc.stdout.splitlines()
        if line.startswith("process_")
    }


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare"
)
def test_process_metrics_are_there_under_the_units_proc_settings() -> None:
    keys = unit_keys()
    # systemd's mapping: ProtectProc= -> hidepid=, ProcSubset= -> subset= (systemd.exec(5)).
    options = [f"hidepid={keys['ProtectProc'][0]}"] if "ProtectProc" in keys else []
    options += [f"subset={keys['ProcSubset'][0]}"] if "ProcSubset" in keys else []
    wanted = {"process_start_time_seconds", "process_cpu_seconds_total"}
    assert wanted <= process_metrics_under(",".join(options) or "defaults")
    # The control: ProcSubset=pid (what the unit had) hides /proc/stat and with it these.
    assert not wanted & process_metrics_under(",".join([*options, "subset=pid"]))
