"""``asyncsched serve`` as systemd runs it: READY, WATCHDOG, reload, STOPPING, exit 0."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.service.sdnotify_listener import NotifyListener

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "unit" / "conf" / "fixtures" / "nova.conf"


def test_serve_speaks_the_notify_protocol_and_stops_cleanly(tmp_path: Path) -> None:
    extra = tmp_path / "asyncsched.conf"
    extra.write_text("[DEFAULT]\ndebug = true\n[asyncsched]\ndrain_timeout = 5\n")
    with NotifyListener() as listener:
        env = dict(
            os.environ,
            NOTIFY_SOCKET=listener.address,
            WATCHDOG_USEC="200000",
            PYTHONUNBUFFERED="1",
        )
        cmd = [sys.executable, "-m", "asyncsched", "serve"]
        cmd += ["--config-file", str(FIXTURE), "--config-file", str(extra)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        try:
            ready = listener.wait_for("READY", "1")
            assert ready["MAINPID"] == str(proc.pid)
            listener.wait_for("WATCHDOG", "1")
            listener.wait_for("WATCHDOG", "1")
            proc.send_signal(signal.SIGHUP)
            listener.wait_for("RELOADING", "1")
            listener.wait_for("READY", "1")
            proc.send_signal(signal.SIGTERM)
            listener.wait_for("STOPPING", "1")
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert f"config files: {FIXTURE}, {extra}" in err
    # A nova.conf full of options we do not use: one debug line for each, nothing worse.
    assert "DEBUG asyncsched.cli [-] ignoring section [keystone_authtoken]" in err
    assert "ignoring option [DEFAULT] my_ip" in err
    assert " ERROR " not in err and " WARNING " not in err
    # Secrets of the fixture never reach the log.
    for secret in ("Rabb1tPa55", "N0vaDbPass", "Ap1DbPass", "K3yst0nePass", "Pl@cement Pass"):
        assert secret not in err
    assert all(line[:4].isdigit() for line in err.splitlines())  # one line per event
