"""SIGTERM drain and SIGHUP reload on a real subprocess, observed over real sockets."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.notify_listener import NotifyListener

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


class Child:
    """The signal_child process plus its notify socket and work socket."""

    def __init__(self, conf: Path, listener: NotifyListener) -> None:
        self.listener = listener
        self.work_path = os.path.join(os.path.dirname(listener.address), "work.sock")
        env = dict(os.environ, NOTIFY_SOCKET=listener.address, PYTHONUNBUFFERED="1")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.integration.service.signal_child",
                self.work_path,
                "--config-file",
                str(conf),
            ],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )

    def request(self, seconds: float) -> Conn:
        """Send one piece of work and wait until it is accepted (it is then in flight)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(30)
        sock.connect(self.work_path)
        sock.sendall(f"work {seconds}\n".encode())
        conn = Conn(sock)
        if read_line(conn) != "accepted":
            conn.close()
            raise AssertionError("work not accepted")
        return conn

    def wait_refused(self, timeout: float = 10) -> None:
        """Poll until a new request is no longer accepted."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                sock = self.request(0)
            except (OSError, AssertionError):
                return
            read_line(sock)
            sock.close()
            time.sleep(0.02)
        raise AssertionError("still accepting new work while stopping")

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def finish(self, timeout: float = 30) -> tuple[int, str]:
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


class Conn:
    """One client connection to the work socket, read line by line."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.file = sock.makefile("r", encoding="utf-8")

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def read_line(conn: Conn) -> str:
    """The next line, or '' at EOF or reset (the server closed without answering)."""
    try:
        return conn.file.readline().strip()
    except ConnectionResetError:
        return ""


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "nova.conf"
    path.write_text(
        "[DEFAULT]\nmy_ip = 10.0.0.1\n[filter_scheduler]\nhost_subset_size = 2\n"
        "[asyncsched]\ndrain_timeout = 20\n"
    )
    return path


@pytest.fixture
def child(conf: Path) -> Iterator[Child]:
    with NotifyListener() as listener:
        c = Child(conf, listener)
        try:
            listener.wait_for("READY", "1")
            yield c
        finally:
            c.kill()


def test_sigterm_drains_in_flight_work_then_exits_0(child: Child) -> None:
    inflight = child.request(1.0)
    child.signal(signal.SIGTERM)
    child.listener.wait_for("STOPPING", "1")
    # No new work once stopping: the component stops listening as its drain begins.
    child.wait_refused()
    assert read_line(inflight) == "done subset=2"  # the in-flight request got its answer
    inflight.close()
    code, err = child.finish()
    assert code == 0, err
    assert "asyncsched stopped" in err
    assert "Traceback" not in err


def test_drain_timeout_bounds_the_shutdown(conf: Path) -> None:
    conf.write_text(conf.read_text().replace("drain_timeout = 20", "drain_timeout = 0.5"))
    with NotifyListener() as listener:
        c = Child(conf, listener)
        try:
            listener.wait_for("READY", "1")
            stuck = c.request(3600)
            c.signal(signal.SIGTERM)
            code, err = c.finish(timeout=30)  # an hour of work does not hold the exit
            assert code == 0, err
            assert read_line(stuck) == ""  # closed without an answer
        finally:
            c.kill()


def test_sighup_reloads_a_mutable_option_without_dropping_work(child: Child, conf: Path) -> None:
    inflight = child.request(1.0)
    conf.write_text(
        "[filter_scheduler]\nhost_subset_size = 7\n[scheduler]\nmax_attempts = 9\n"
        "[asyncsched]\ndrain_timeout = 20\n"
    )
    child.signal(signal.SIGHUP)
    child.listener.wait_for("RELOADING", "1")
    ready = child.listener.wait_for("READY", "1")
    assert "reloaded" in ready["STATUS"]
    assert read_line(inflight) == "done subset=7"  # not dropped; finished under the new value
    inflight.close()
    fresh = child.request(0)
    assert read_line(fresh) == "done subset=7"
    fresh.close()
    child.signal(signal.SIGTERM)
    code, err = child.finish()
    assert code == 0, err
    assert "[scheduler] max_attempts changed in the config files but needs a restart" in err
    assert "configuration reloaded: [filter_scheduler] host_subset_size" in err


def test_invalid_sighup_keeps_the_old_config(child: Child, conf: Path) -> None:
    conf.write_text("[filter_scheduler]\nhost_subset_size = lots\n")
    child.signal(signal.SIGHUP)
    child.listener.wait_for("RELOADING", "1")
    ready = child.listener.wait_for("READY", "1")
    assert "last reload failed" in ready["STATUS"]
    sock = child.request(0)
    assert read_line(sock) == "done subset=2"
    sock.close()
    child.signal(signal.SIGTERM)
    code, err = child.finish()
    assert code == 0, err
    error_lines = [line for line in err.splitlines() if "reload failed" in line]
    assert len(error_lines) == 1
    assert f"{conf}:2: [filter_scheduler] host_subset_size = 'lots'" in error_lines[0]
    assert "an integer >= 1" in error_lines[0]
