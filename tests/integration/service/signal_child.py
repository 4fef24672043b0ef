"""Child process for the signal tests: the real Service, real signals, a test component.

Usage: python -m tests.integration.service.signal_child SOCKET --config-file F [...]

The component serves a tiny line protocol on a unix socket: the client sends ``work S`` and
gets ``accepted`` at once and ``done subset=N`` after S seconds, N being the
``[filter_scheduler] host_subset_size`` in force when the work finishes. That is enough to see
from outside that in-flight work survives SIGHUP and is drained on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from dataclasses import dataclass
from typing import Any

from asyncsched.cli import build_parser, sources_from_args
from asyncsched.common.health import Snapshot
from asyncsched.common.systemd import SystemdNotifier
from asyncsched.conf import load
from asyncsched.conf.options import Config
from asyncsched.logs import setup_logging
from asyncsched.service import Service


@dataclass(frozen=True, slots=True)
class InFlight(Snapshot):
    inflight: int


class WorkServer:
    name = "work"

    def __init__(self, path: str, config: Config) -> None:
        self.path = path
        self.config = config
        self._server: asyncio.Server | None = None
        self._inflight: set[asyncio.Task[Any]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_unix_server(self._handle, self.path)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._inflight.add(task)
        try:
            line = await reader.readline()
            seconds = float(line.split()[1])
            writer.write(b"accepted\n")
            await writer.drain()
            await asyncio.sleep(seconds)
            writer.write(f"done subset={self.config.filter_scheduler.host_subset_size}\n".encode())
            await writer.drain()
        finally:
            self._inflight.discard(task)
            writer.close()

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109
        """Stop accepting, then wait for the work in flight."""
        if self._server is not None:
            self._server.close()
        if self._inflight:
            await asyncio.wait(set(self._inflight), timeout=timeout)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._inflight):
            task.cancel()
        for task in list(self._inflight):
            with contextlib.suppress(BaseException):
                await task

    def reconfigure(self, config: Config) -> None:
        self.config = config

    def health(self) -> InFlight:
        return InFlight(inflight=len(self._inflight))


def main() -> int:
    socket_path, rest = sys.argv[1], sys.argv[2:]
    args = build_parser().parse_args(["serve", *rest])
    sources = sources_from_args(args)
    config = load(sources).config
    setup_logging(config)
    service = Service(
        config, [WorkServer(socket_path, config)], SystemdNotifier.from_env(), sources
    )
    return asyncio.run(service.run())


if __name__ == "__main__":
    raise SystemExit(main())
