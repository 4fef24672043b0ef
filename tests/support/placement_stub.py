"""A stand-in Placement on a local aiohttp server, for the PlacementClient unit tests: each
test gives the routes (method, path) -> handler it needs; ``GET /`` answers the versions."""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

from asyncsched.conf.options import PlacementOptions
from asyncsched.placement.client import PlacementClient

VERSIONS = {"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0"}]}
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(routes: dict[tuple[str, str], Handler]) -> TestServer:
    app = web.Application()

    async def root(request: web.Request) -> web.Response:
        return web.json_response(VERSIONS)

    app.router.add_get("/", root)
    for (method, path), handler in routes.items():
        app.router.add_route(method, path, handler)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def client_for(
    stack: list[Any], routes: dict[tuple[str, str], Handler], **kw: Any
) -> tuple[PlacementClient, TestServer]:
    server = await serve(routes)
    stack.append(server)
    opts = PlacementOptions(
        auth_type="none", endpoint_override=str(server.make_url("")), timeout=kw.pop("timeout", 5.0)
    )
    client = PlacementClient(opts, claim_backoff=0.01, rng=random.Random(1), **kw)
    stack.append(client)
    await client.start()
    return client, server
