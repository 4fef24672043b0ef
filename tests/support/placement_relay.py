"""A loopback TCP relay to Placement that can hold every response back (tests).

With ``delay`` set, each response chunk waits that long, so a batch stays in flight long
enough for a test to signal, kill or cut something mid-call (``flowing`` cleared holds them
all until it is set again); ``candidates_seen`` tells when a
GET /allocation_candidates passed (the daemon is then inside a call). With ``claim_group``
above 1, claims going up (``PUT /allocations/...``, ``POST /allocations``) wait until that many
are waiting, or ``claim_wait`` seconds passed, and then go on together: claims that several
schedulers decided at about the same time reach Placement at the same moment, which is when
its race between concurrent claims shows.
"""

from __future__ import annotations

import asyncio
from typing import Any


class Relay:
    """A TCP relay to Placement that can delay every response chunk by ``delay`` seconds and
    tells when a GET /allocation_candidates passed (the daemon is then inside a call)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.delay = 0.0
        self.candidates_seen = asyncio.Event()
        self.claim_seen = asyncio.Event()  # a claim (PUT or shared POST) went up to Placement
        self.flowing = asyncio.Event()  # cleared: responses are held until set again
        self.flowing.set()
        self.claim_group = 0  # above 1: claims go up to Placement in groups of this many
        self.claim_wait = 0.3  # ... or whatever waited this long
        self.claim_groups: list[int] = []  # size of each group released
        self._held: list[asyncio.Future[None]] = []
        self._server: asyncio.Server | None = None
        self._conns: set[asyncio.Task[Any]] = set()
        self.port = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._conns):
            task.cancel()
        await asyncio.gather(*self._conns, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            self._conns.discard(task)
            return

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, down: bool) -> None:
            try:
                while data := await src.read(65536):
                    if not down and b"/allocation_candidates" in data:
                        self.candidates_seen.set()
                    if not down and _is_claim(data):
                        self.claim_seen.set()
                    if not down and self.claim_group > 1 and _is_claim(data):
                        await self._gate()
                    if down:
                        await self.flowing.wait()
                    if down and self.delay:
                        await asyncio.sleep(self.delay)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        try:
            await asyncio.gather(pump(reader, up_w, False), pump(up_r, writer, True))
        finally:
            self._conns.discard(task)

    async def _gate(self) -> None:
        loop = asyncio.get_running_loop()
        mine: asyncio.Future[None] = loop.create_future()
        self._held.append(mine)
        if len(self._held) >= self.claim_group:
            self._release()
        else:
            loop.call_later(self.claim_wait, self._release_if_waiting, mine)
        await mine

    def _release_if_waiting(self, claim: asyncio.Future[None]) -> None:
        if not claim.done():
            self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        self.claim_groups.append(len(held))
        for claim in held:
            if not claim.done():
                claim.set_result(None)


def _is_claim(data: bytes) -> bool:
    return b"PUT /allocations/" in data or b"POST /allocations " in data
