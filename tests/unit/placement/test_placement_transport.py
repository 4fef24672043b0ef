"""The Placement client's request steps: the error mapping, the retry policy, one exchange."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import aiohttp
import pytest

from asyncsched.conf.options import PlacementOptions
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.errors import (
    PlacementConnectionError,
    PlacementDisconnected,
    PlacementTimeout,
    transport_error,
)
from asyncsched.placement.transport import Call, RetryPolicy


def _refused() -> aiohttp.ClientConnectorError:
    conn_key = aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 1, False, True, None, None, None)
    return aiohttp.ClientConnectorError(conn_key, ConnectionRefusedError(111, "refused"))


def test_errors_map_refused_timeout_and_broken_in_that_order() -> None:
    def mapped(exc: aiohttp.ClientError | TimeoutError) -> type:
        return type(transport_error(exc, "http://p", "GET /", 30.0))

    assert mapped(_refused()) is PlacementConnectionError
    # aiohttp's connect timeout is both a ClientError and a TimeoutError: a timeout
    assert mapped(aiohttp.ConnectionTimeoutError()) is PlacementTimeout
    assert mapped(TimeoutError()) is PlacementTimeout
    assert mapped(aiohttp.ServerDisconnectedError()) is PlacementDisconnected
    err = transport_error(TimeoutError(), "http://p", "PUT /allocations/c", 2.5)
    assert str(err) == "Placement at http://p did not answer PUT /allocations/c within 2.5 s"


def test_retry_policy() -> None:
    broken = PlacementDisconnected("broken")
    refused = PlacementConnectionError("refused")
    timeout = PlacementTimeout("late")
    none = RetryPolicy(0)
    # a stale keep-alive socket: an idempotent call goes again at once, once by default
    assert none.wait(broken, "GET", 0) == 0.0
    assert none.wait(broken, "DELETE", 0) == 0.0
    assert none.wait(broken, "GET", 1) is None
    assert none.wait(broken, "PUT", 0) is None
    assert none.wait(broken, "POST", 0) is None
    assert none.wait(refused, "GET", 0) is None
    three = RetryPolicy(3)
    assert [three.wait(refused, "PUT", a) for a in range(4)] == [0.5, 1.0, 2.0, None]
    assert [three.wait(broken, "GET", a) for a in range(4)] == [0.0, 0.0, 0.0, None]
    assert three.wait(timeout, "GET", 0) is None


def test_call_headers_and_url() -> None:
    call = Call.build(
        "http://p:8778", "PUT", "/allocations/c", version="1.28", query="a=1", body={"x": 1}
    )
    assert str(call.url) == "http://p:8778/allocations/c?a=1"
    assert call.data == b'{"x":1}'
    assert call.label == "PUT" and call.what == "PUT /allocations/c"
    assert call.headers() == {
        "Accept": "application/json",
        "User-Agent": "asyncsched",
        "OpenStack-API-Version": "placement 1.28",
        "Content-Type": "application/json",
    }
    bare = Call.build("http://p", "GET", "/", version=None, op="ping")
    assert bare.label == "ping" and bare.data is None
    assert bare.headers() == {"Accept": "application/json", "User-Agent": "asyncsched"}


class _DroppingPlacement:
    """A raw HTTP/1.1 Placement root that hangs up on the next ``drop`` requests unanswered.

    Every connection serves one request (``Connection: close``), so aiohttp's own resend on a
    reused keep-alive socket never happens: every try seen here is the client's."""

    def __init__(self) -> None:
        self.drop = 0
        self.requests = 0
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = json.dumps({"versions": [{"max_version": "1.39"}]}).encode()
        try:
            await reader.readuntil(b"\r\n\r\n")
            self.requests += 1
            if self.drop:
                self.drop -= 1
            else:
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


@pytest.fixture
async def dropping() -> AsyncIterator[tuple[_DroppingPlacement, PlacementClient]]:
    peer = _DroppingPlacement()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    peer.server = await asyncio.start_server(peer.handle, "127.0.0.1", port)
    client = PlacementClient(
        PlacementOptions(auth_type="none", endpoint_override=f"http://127.0.0.1:{port}")
    )
    await client.start()
    yield peer, client
    await client.close()
    peer.server.close()


async def test_a_get_whose_connection_broke_is_sent_again(
    dropping: tuple[_DroppingPlacement, PlacementClient],
) -> None:
    peer, client = dropping
    # aiohttp itself resends an idempotent request once on a broken connection, so one try
    # of ours is two requests here; the client's policy adds one more try of its own.
    peer.drop = 100
    before = peer.requests
    with pytest.raises(PlacementDisconnected):
        await client.ping()
    assert peer.requests - before == 4
    assert client.health()["errors"] == 1
    peer.drop = 3  # our first try (two requests) and aiohttp's first send of our second
    before = peer.requests
    await client.ping()
    assert peer.requests - before == 4
    assert client.health()["errors"] == 1
