"""PlacementClient reports every call (by call and status class) and counts failed claims."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiohttp import web
from prometheus_client import generate_latest

from asyncsched.admin.metrics import build_registry
from asyncsched.common.health import ServiceHealth
from asyncsched.exceptions import PlacementError
from asyncsched.placement.query import ResourceRequest
from tests.support.placement_stub import client_for
from tests.support.recorder import RecordingRecorder


async def test_calls_by_name_and_status_class(stack: list[Any]) -> None:
    async def refuse(request: web.Request) -> web.Response:
        body = {"errors": [{"status": 409, "code": "placement.undefined_code", "detail": "full"}]}
        return web.json_response(body, status=409)

    async def boom(request: web.Request) -> web.Response:
        return web.Response(status=503, text="down")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.json_response({})

    rec = RecordingRecorder()
    client, _ = await client_for(
        stack,
        {
            ("PUT", "/allocations/{c}"): refuse,
            ("GET", "/allocation_candidates"): boom,
            ("GET", "/allocations/{c}"): slow,
        },
        recorder=rec,
        timeout=0.3,
    )
    await client.ping()
    assert await client.claim("c1", {"allocations": {}}, project_id="p", user_id="u") is False
    with pytest.raises(PlacementError):
        await client.get_allocation_candidates(ResourceRequest())
    with pytest.raises(PlacementError):
        await client.get_allocations("c1")
    assert [c[:2] for c in rec.named("placement_call")] == [
        ("version", "2xx"),  # start(): version discovery
        ("ping", "2xx"),
        ("claim", "4xx"),
        ("allocation_candidates", "5xx"),
        ("get_allocations", "error"),
    ]
    health = client.health()
    assert health["claims"] == 1 and health["claims_failed"] == 1


async def test_a_fenced_undo_is_counted_and_exported(stack: list[Any]) -> None:
    """An undo Placement refuses on the consumer generation (the consumer is another writer's
    now) is left alone, counted in ``fenced`` and scraped as a Prometheus counter."""

    async def put(request: web.Request) -> web.Response:
        body = await request.json()
        if body["allocations"]:  # the claim
            return web.Response(status=204)
        detail = "consumer generation conflict - expected 1 but got 2"
        return web.json_response(
            {"errors": [{"status": 409, "code": "placement.concurrent_update", "detail": detail}]},
            status=409,
        )

    client, _ = await client_for(stack, {("PUT", "/allocations/{c}"): put})
    ar = {"allocations": {"rp1": {"resources": {"VCPU": 1}}}}
    assert await client.claim("c1", ar, project_id="p", user_id="u")
    await client.rollback(["c1"])
    assert client.health()["fenced"] == 1
    registry, _ = build_registry(lambda: ServiceHealth("running", {"placement": client.health()}))
    text = generate_latest(registry).decode()
    assert "asyncsched_placement_fenced_undos_total 1.0" in text.splitlines()
