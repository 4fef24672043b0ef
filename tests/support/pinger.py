"""nova's BaseAPI ping from a process of its own, as another conductor would send it.

A pinger thread inside the test process shares the GIL with an in-process daemon: while the
daemon decides (CPU-bound Python), each socket step of the pinger waits for a GIL switch
(5 ms or more), so its round trips measured the two threads' GIL contention, not the daemon's
event loop. In its own process the pinger measures what another caller sees.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from multiprocessing.connection import Connection
from types import TracebackType


def _loop(url: str, every: float, stop: Connection, out: Connection) -> None:
    from tests.support.oslo_caller import OsloSchedulerClient

    client = OsloSchedulerClient(url, timeout=30.0, call_monitor_timeout=None)
    try:
        assert client.ping("warm")["arg"] == "warm"
        out.send("ready")
        rtts: list[float] = []
        while not stop.poll(every):
            t0 = time.perf_counter()
            assert client.ping("tick")["arg"] == "tick"
            rtts.append(time.perf_counter() - t0)
        out.send(rtts)
    finally:
        client.close()


class Pinger:
    """``async with Pinger(url) as p: ...`` then ``p.rtts``: round trips of pings sent every
    ``every`` seconds from a child process while the block ran. The waits run in a thread, so
    a daemon on the caller's own event loop keeps answering."""

    def __init__(self, url: str, every: float = 0.02) -> None:
        ctx = mp.get_context("spawn")
        self._stop_r, self._stop_w = ctx.Pipe(duplex=False)
        self._out_r, self._out_w = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(
            target=_loop, args=(url, every, self._stop_r, self._out_w), daemon=True
        )
        self.rtts: list[float] = []

    def _ready(self) -> None:
        if not self._out_r.poll(60):
            raise TimeoutError("the pinger process did not get a first answer in 60 s")
        assert self._out_r.recv() == "ready"

    def _finish(self) -> None:
        self._stop_w.send(True)
        if self._out_r.poll(60):
            self.rtts = list(self._out_r.recv())
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()

    async def __aenter__(self) -> Pinger:
        self._proc.start()
        try:
            await asyncio.to_thread(self._ready)
        except BaseException:
            await asyncio.to_thread(self._finish)
            raise
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self._finish)
