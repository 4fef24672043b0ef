"""A loopback TCP relay to Placement that can hold every response back (tests).

With ``delay`` set, each response chunk waits that long, so a batch stays in flight long
enough for a test to signal, kill or cut something mid-call (``flowing`` cleared holds them
all until it is set again); ``candidates_seen`` tells when a
GET /allocation_candidates passed (the daemon is then inside a call). With ``claim_group``
above 1, a claim going up (``PUT /allocations/...``, ``POST /allocations``; not an undo, which names
no provider) waits until that
many claims naming one of its providers wait, or ``claim_wait`` seconds passed, and then they
go on together: claims that several schedulers decided at about the same time for the same
host reach Placement at the same moment, which is when its race between concurrent claims
shows. Claims for other hosts are not held for each other.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import Any

# A provider in a claim's body: ``"<uuid>": {"resources": ...`` (PUT and POST bodies alike).
_PROVIDER = re.compile(rb'"([0-9a-f-]{36})"\s*:\s*\{\s*"resources"')


@dataclass(frozen=True, eq=False)  # compared by identity: two claims may name the same hosts
class _Held:
    providers: frozenset[bytes]
    go: asyncio.Future[None]


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
        self.claim_group = 0  # above 1: claims on one host go up in groups of this many
        self.claim_wait = 0.3  # ... or whatever waited this long
        self.claim_groups: list[int] = []  # size of each group released
        self._held: list[_Held] = []
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
                        data = await _whole_request(src, data)
                        providers = frozenset(_PROVIDER.findall(data))
                        # A write naming no provider (a fenced undo: PUT of ``{}`` at the
                        # consumer generation) claims nothing: it is never held.
                        if providers:
                            await self._gate(providers)
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

    async def _gate(self, providers: frozenset[bytes]) -> None:
        mine = _Held(providers, asyncio.get_running_loop().create_future())
        self._held.append(mine)
        if len(self._partners(mine)) >= self.claim_group:
            self._release(mine)
        else:
            asyncio.get_running_loop().call_later(self.claim_wait, self._release, mine)
        await mine.go

    def _partners(self, claim: _Held) -> list[_Held]:
        """The held claims (``claim`` among them) that name one of its providers."""
        return [h for h in self._held if h is claim or h.providers & claim.providers]

    def _release(self, claim: _Held) -> None:
        if claim.go.done():
            return
        group = self._partners(claim)
        self._held = [h for h in self._held if h not in group]
        self.claim_groups.append(len(group))
        for h in group:
            if not h.go.done():  # (a claim whose connection closed was cancelled)
                h.go.set_result(None)


async def _whole_request(src: asyncio.StreamReader, data: bytes) -> bytes:
    """``data`` and what follows it up to the end of its body (Content-Length), so that the
    claim's providers can be read: a client may send the head and the body apart."""
    head, sep, body = data.partition(b"\r\n\r\n")
    while not sep:
        more = await src.read(65536)
        if not more:
            return data
        data += more
        head, sep, body = data.partition(b"\r\n\r\n")
    length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    want = int(length.group(1)) if length else 0
    while len(body) < want:
        more = await src.read(want - len(body))
        if not more:
            break
        body += more
    return head + sep + body


def _is_claim(data: bytes) -> bool:
    return b"PUT /allocations/" in data or b"POST /allocations " in data
