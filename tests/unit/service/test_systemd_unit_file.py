"""systemd/asyncsched.service: verified by systemd-analyze and checked for the contract keys."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsched.conf.options import Config

ROOT = Path(__file__).resolve().parents[3]
UNIT = ROOT / "systemd" / "asyncsched.service"


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
    text = UNIT.read_text().replace("ExecStart=/usr/bin/asyncsched", f"ExecStart={exe}")
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
