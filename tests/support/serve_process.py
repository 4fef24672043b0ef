"""``asyncsched serve`` as a real subprocess, the way systemd runs it (tests and benchmarks).

A notify socket stands where systemd's would, so ``start`` returns at READY=1; stderr goes to
a file the test reads when something fails. ``kill`` is SIGKILL (a crash: nothing drained),
``terminate`` SIGTERM (systemctl stop). ``rss_kb`` reads the kernel's resident set size, so a
soak or fuzz run can tell whether memory stays flat.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.notify_listener import NotifyListener

ROOT = Path(__file__).resolve().parents[2]


class ServeProcess:
    """One ``python -m asyncsched serve --config-file conf`` child, stderr kept in ``log``."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.conf = conf
        self.log = log
        self.listener = NotifyListener()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(os.environ, NOTIFY_SOCKET=self.listener.address, PYTHONUNBUFFERED="1")
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "asyncsched", "serve", "--config-file", str(self.conf)],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Block until READY=1 from this process; the stderr tail is in the error otherwise."""
        try:
            ready = self.listener.wait_for("READY", "1", timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}\n--- stderr ---\n{self.stderr()[-4000:]}") from None
        assert self.proc is not None and ready.get("MAINPID") == str(self.proc.pid), ready

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: the process dies mid-whatever, nothing is drained or acked."""
        if self.alive():
            assert self.proc is not None
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def terminate(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: the exit status (SIGKILL after ``timeout``)."""
        assert self.proc is not None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def stop(self) -> None:
        self.kill()
        self.listener.close()

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def rss_kb(self) -> int:
        """VmRSS of the process in KiB (0 once it is gone)."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except (FileNotFoundError, ProcessLookupError):
            return 0
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0
