"""Writing a daemon's config file and serving it (``serving``) for the e2e and admin tests.

The process itself is :class:`tests.support.serve_process.ServeProcess`, the one way the tests
start, wait for and stop the real ``asyncsched serve``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

from asyncsched.conf.options import Config
from tests.support.cloud import config_file_text
from tests.support.serve_process import ServeProcess


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
async def serving(conf: Path, ready_timeout: float = 60.0) -> AsyncIterator[ServeProcess]:
    """The daemon started and READY=1; its stderr printed if the body fails; killed after."""
    daemon = ServeProcess(conf, conf.parent / "stderr.log")
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
