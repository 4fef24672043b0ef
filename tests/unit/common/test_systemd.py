"""sd_notify against a real unix datagram socket."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from asyncsched.common.systemd import SystemdNotifier
from tests.support.notify_listener import NotifyListener


@pytest.fixture
def listener() -> Iterator[NotifyListener]:
    with NotifyListener() as lst:
        yield lst


def test_ready_status_stopping_watchdog(listener: NotifyListener) -> None:
    notifier = SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.address})
    assert notifier.enabled
    assert notifier.status("starting host state (1/3)")
    assert listener.recv() == {"STATUS": "starting host state (1/3)"}
    assert notifier.ready(status="ready")
    assert listener.recv() == {"READY": "1", "MAINPID": str(os.getpid()), "STATUS": "ready"}
    assert notifier.watchdog()
    assert listener.recv() == {"WATCHDOG": "1"}
    assert notifier.reloading()
    msg = listener.recv()
    assert msg["RELOADING"] == "1" and int(msg["MONOTONIC_USEC"]) > 0
    assert notifier.stopping(status="draining")
    assert listener.recv() == {"STOPPING": "1", "STATUS": "draining"}
    notifier.close()


def test_status_newlines_cannot_inject_fields(listener: NotifyListener) -> None:
    notifier = SystemdNotifier(listener.address)
    notifier.status("bad\nREADY=1")
    assert listener.recv() == {"STATUS": "bad READY=1"}
    notifier.close()


def test_abstract_socket() -> None:
    with NotifyListener(abstract=True) as listener:
        assert listener.address.startswith("@")
        notifier = SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.address})
        assert notifier.ready()
        assert listener.recv()["READY"] == "1"
        notifier.close()


def test_noop_without_notify_socket() -> None:
    notifier = SystemdNotifier.from_env({})
    assert not notifier.enabled
    assert notifier.ready() is False
    assert notifier.watchdog() is False
    assert notifier.watchdog_interval is None


def test_watchdog_interval_is_half_of_watchdog_usec(listener: NotifyListener) -> None:
    env = {"NOTIFY_SOCKET": listener.address, "WATCHDOG_USEC": "30000000"}
    assert SystemdNotifier.from_env(env).watchdog_interval == 15.0
    mine = dict(env, WATCHDOG_PID=str(os.getpid()))
    assert SystemdNotifier.from_env(mine).watchdog_interval == 15.0
    other = dict(env, WATCHDOG_PID=str(os.getpid() + 1))
    assert SystemdNotifier.from_env(other).watchdog_interval is None
    assert SystemdNotifier.from_env({"NOTIFY_SOCKET": listener.address}).watchdog_interval is None


def test_send_to_a_vanished_socket_does_not_raise() -> None:
    listener = NotifyListener()
    notifier = SystemdNotifier(listener.address)
    listener.close()  # systemd went away
    assert notifier.ready() is False
    notifier.close()
