"""``asyncsched serve --config-file F`` in a subprocess, run the way systemd runs it.

One way to start, wait for and stop the real daemon, for the e2e and admin tests and for
``tools/demo.py`` (importable without pytest).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from asyncsched.conf.options import Config
from tests.support.cloud import config_file_text
from tests.support.notify_listener import NotifyListener

ROOT = Path(__file__).resolve().parents[2]


class Daemon:
    """``asyncsched serve`` in a subprocess with a notify socket, stderr kept in a file."""

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

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.listener.close()

    def stderr(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def write_config(folder: Path, config: Config, *, admin_token: str | None = None) -> Path:
    """``folder/asyncsched.conf`` for ``config``; with ``admin_token``, the token goes to
    ``folder/token`` and the config names it as ``admin_token_file``."""
    if admin_token is not None:
        token_file = folder / "token"
        token_file.write_text(admin_token + "\n")
        admin = dataclasses.replace(config.asyncsched, admin_token_file=str(token_file))
        config = dataclasses.replace(config, asyncsched=admin)
    conf = folder / "asyncsched.conf"
    conf.write_text(config_file_text(config))
    return conf


@contextlib.asynccontextmanager
async def serving(conf: Path, ready_timeout: float = 60.0) -> AsyncIterator[Daemon]:
    """The daemon started and READY=1; its stderr printed if the body fails; killed after."""
    daemon = Daemon(conf, conf.parent / "stderr.log")
    daemon.start()
    try:
        ready = await asyncio.to_thread(daemon.listener.wait_for, "READY", "1", ready_timeout)
        assert daemon.proc is not None and ready["MAINPID"] == str(daemon.proc.pid), ready
        yield daemon
    except BaseException:
        print(daemon.stderr())
        raise
    finally:
        daemon.stop()
