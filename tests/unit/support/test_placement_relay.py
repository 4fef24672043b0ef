"""The Placement relay of the chaos tests lets claims up in groups, and never holds an undo.

A fenced undo of a claim is ``PUT /allocations/{consumer}`` of ``{}`` at the consumer
generation: it names no provider. The relay once held it for ever (a write naming no provider
had no partners, not even itself, so its group was never released): the daemon's rollback hung
until the relay closed, and the chaos test's audit found the call's claims leaked.
"""

from __future__ import annotations

import asyncio
import json

from tests.support.placement_relay import Relay


async def _upstream() -> tuple[asyncio.Server, int]:
    """A stand-in Placement answering every request 204."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                writer.write(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _put(port: int, consumer: str, body: dict[str, object]) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(
        f"PUT /allocations/{consumer} HTTP/1.1\r\nHost: placement\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    await writer.drain()
    try:
        return await reader.readuntil(b"\r\n\r\n")
    finally:
        writer.close()


async def _with_relay(body: dict[str, object]) -> bytes:
    server, port = await _upstream()
    relay = Relay(port)
    await relay.start()
    relay.claim_group = 3
    relay.claim_wait = 0.05
    try:
        return await asyncio.wait_for(_put(relay.port, "c1", body), 5)
    finally:
        await relay.close()
        server.close()


async def test_a_fenced_undo_naming_no_provider_is_not_held() -> None:
    answer = await _with_relay({"allocations": {}, "consumer_generation": 1})
    assert answer.startswith(b"HTTP/1.1 204")


async def test_a_lone_claim_goes_up_after_the_wait() -> None:
    rp = "7bf33649-60a5-47f9-90dd-d5856bccc40c"
    answer = await _with_relay({"allocations": {rp: {"resources": {"VCPU": 1}}}})
    assert answer.startswith(b"HTTP/1.1 204")


async def test_a_held_write_naming_no_provider_is_released_on_its_own() -> None:
    relay = Relay(1)
    relay.claim_group = 3
    relay.claim_wait = 0.01
    await asyncio.wait_for(relay._gate(frozenset()), 2)
    assert relay.claim_groups == [1]
