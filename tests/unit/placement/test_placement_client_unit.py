"""PlacementClient behaviour that needs a misbehaving peer: small local aiohttp stand-ins."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import socket
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from asyncsched.conf.options import AsyncschedOptions, Config, PlacementOptions
from asyncsched.exceptions import (
    AllocationDeleteFailed,
    AllocationUpdateFailed,
    ConfigError,
    ConsumerHeld,
    PlacementError,
)
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.claims import ClaimBatch, ClaimResult
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.errors import (
    PlacementConnectionError,
    PlacementHTTPError,
    PlacementTimeout,
)
from asyncsched.placement.query import ResourceRequest
from tests.support.placement_stub import Handler, client_for, serve

AR1 = {"allocations": {"rp1": {"resources": {"VCPU": 1}}}}


def holding(allocation: dict[str, Any]) -> Handler:
    """GET /allocations/{c}: every consumer holds ``allocation`` at generation 1."""

    async def get(request: web.Request) -> web.Response:
        return web.json_response(
            {**allocation, "consumer_generation": 1, "project_id": "p", "user_id": "u"}
        )

    return get


def claiming_slowly(deleted: list[str], delay: float = 0.0) -> Handler:
    """PUT /allocations/{c}: a claim answers after ``delay``; an undo (empty allocations,
    fenced on a generation) answers 204 at once and notes the consumer in ``deleted``."""

    async def put(request: web.Request) -> web.Response:
        body = await request.json()
        if body["allocations"] == {}:
            assert body["consumer_generation"] is not None  # never an unconditional delete
            deleted.append(request.match_info["c"])
            return web.Response(status=204)
        await asyncio.sleep(delay)
        return web.Response(status=204)

    return put


def conflict(detail: str) -> web.Response:
    body = {"errors": [{"status": 409, "code": "placement.concurrent_update", "detail": detail}]}
    return web.json_response(body, status=409)


# ---- Candidates parsing ----


def test_candidates_index_every_provider_including_nested_without_copies() -> None:
    ar1 = {"allocations": {"root1": {"resources": {"VCPU": 1}}, "gpu1": {"resources": {"VGPU": 1}}}}
    ar2 = {"allocations": {"root1": {"resources": {"VCPU": 1}}, "gpu2": {"resources": {"VGPU": 1}}}}
    ar3 = {"allocations": {"root2": {"resources": {"VCPU": 1}}}}
    body = {
        "allocation_requests": [ar1, ar2, ar3],
        "provider_summaries": {"root1": {}, "root2": {}},
    }
    c = Candidates.parse(body)
    assert set(c.alloc_reqs_by_rp_uuid) == {"root1", "gpu1", "gpu2", "root2"}
    assert c.alloc_reqs_by_rp_uuid["root1"][0] is ar1 and c.alloc_reqs_by_rp_uuid["root1"][1] is ar2
    assert c.alloc_reqs_by_rp_uuid["gpu2"] == [ar2]
    assert c and not Candidates.empty()
    merged = (
        Candidates.empty()
        .merge(c)
        .merge(
            Candidates.parse({"allocation_requests": [ar3], "provider_summaries": {"root2": {}}})
        )
    )
    assert merged.alloc_reqs_by_rp_uuid["root2"] == [ar3, ar3]
    assert len(c.alloc_reqs_by_rp_uuid["root2"]) == 1  # merge did not touch the original
    with pytest.raises(PlacementError):
        Candidates.parse({"allocation_requests": None})


# ---- transport errors ----


async def test_connection_refused_is_a_clear_error_fast() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = PlacementClient(
        PlacementOptions(auth_type="none", endpoint_override=f"http://127.0.0.1:{port}")
    )
    with pytest.raises(
        PlacementConnectionError, match=re.escape("Placement unreachable at http://127.0.0.1")
    ):
        await asyncio.wait_for(client.start(), 10)  # refused must not hang
    assert client.health()["errors"] == 1
    await client.close()


async def test_5xx_non_json_and_timeout(stack: list[Any]) -> None:
    async def boom(request: web.Request) -> web.Response:
        return web.Response(status=503, text="upstream gone")

    async def html(request: web.Request) -> web.Response:
        return web.Response(status=200, text="<html>proxy</html>", content_type="text/html")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(2)
        return web.json_response({})

    client, _ = await client_for(
        stack,
        {
            ("GET", "/allocation_candidates"): boom,
            ("GET", "/allocations/{c}"): html,
            ("DELETE", "/allocations/{c}"): slow,
        },
        timeout=0.3,
    )
    with pytest.raises(PlacementHTTPError, match="HTTP 503: upstream gone") as err:
        await client.get_allocation_candidates(ResourceRequest())
    assert err.value.status == 503
    with pytest.raises(PlacementError, match="non-JSON body"):
        await client.get_allocations("c1")
    with pytest.raises(
        PlacementTimeout, match=re.escape("did not answer DELETE /allocations/c1 within 0.3 s")
    ):
        await client._request("DELETE", "/allocations/c1", version="1.36")
    assert client.health()["errors"] == 3


async def test_start_refuses_too_old_placement(stack: list[Any]) -> None:
    app = web.Application()

    async def root(request: web.Request) -> web.Response:
        return web.json_response({"versions": [{"max_version": "1.30"}]})

    app.router.add_get("/", root)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    stack.append(server)
    client = PlacementClient(
        PlacementOptions(auth_type="none", endpoint_override=str(server.make_url("")))
    )
    stack.append(client)
    with pytest.raises(PlacementError, match=re.escape("up to 1.30; asyncsched needs 1.36")):
        await client.start()


async def test_from_config_sends_the_configured_noauth_token(stack: list[Any]) -> None:
    seen: list[str | None] = []

    async def cands(request: web.Request) -> web.Response:
        seen.append(request.headers.get("X-Auth-Token"))
        return web.json_response({"allocation_requests": [], "provider_summaries": {}})

    server = await serve({("GET", "/allocation_candidates"): cands})
    stack.append(server)
    config = Config(
        placement=PlacementOptions(auth_type="noauth", endpoint_override=str(server.make_url(""))),
        asyncsched=AsyncschedOptions(placement_noauth_token="lab-token"),
    )
    client = PlacementClient.from_config(config)
    stack.append(client)
    await client.start()
    await client.get_allocation_candidates(ResourceRequest())
    assert seen == ["lab-token"]


def test_noauth_needs_an_endpoint() -> None:
    with pytest.raises(ConfigError, match="endpoint_override"):
        PlacementClient(PlacementOptions(auth_type="none"))


async def test_headers_and_querystring_sent(stack: list[Any]) -> None:
    seen: dict[str, Any] = {}

    async def cands(request: web.Request) -> web.Response:
        seen["qs"] = request.raw_path.partition("?")[2]
        seen["version"] = request.headers.get("OpenStack-API-Version")
        seen["token"] = request.headers.get("X-Auth-Token")
        return web.json_response({"allocation_requests": [], "provider_summaries": {}})

    client, _ = await client_for(
        stack, {("GET", "/allocation_candidates"): cands}, noauth_token="tok"
    )
    rr = ResourceRequest(root_forbidden=frozenset({"COMPUTE_STATUS_DISABLED"}))
    c = await client.get_allocation_candidates(rr)
    assert not c
    assert seen == {
        "qs": "limit=1000&root_required=%21COMPUTE_STATUS_DISABLED",
        "version": "placement 1.36",
        "token": "tok",
    }


# ---- claims ----


async def test_claim_retries_provider_generation_conflicts(stack: list[Any]) -> None:
    bodies: list[dict[str, Any]] = []

    async def put(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        if len(bodies) < 3:
            return conflict("resource provider generation conflict")
        return web.Response(status=204)

    client, _ = await client_for(stack, {("PUT", "/allocations/{c}"): put})
    ar = {"allocations": {"rp": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp"]}}
    assert await client.claim("c1", ar, project_id="p", user_id="u") is True
    assert len(bodies) == 3
    assert bodies[0] == {**ar, "project_id": "p", "user_id": "u", "consumer_generation": None}
    assert "project_id" not in ar  # the shared allocation request is untouched
    assert client.health()["claim_conflicts"] == 2


async def test_claim_gives_up_after_four_attempts(stack: list[Any]) -> None:
    calls = 0

    async def put(request: web.Request) -> web.Response:
        nonlocal calls
        calls += 1
        return conflict("resource provider generation conflict")

    client, _ = await client_for(stack, {("PUT", "/allocations/{c}"): put})
    assert await client.claim("c1", {"allocations": {}}, project_id="p", user_id="u") is False
    assert calls == 4


async def test_consumer_generation_conflict_raises(stack: list[Any]) -> None:
    async def put(request: web.Request) -> web.Response:
        return conflict("consumer generation conflict - expected null but got 1")

    client, _ = await client_for(stack, {("PUT", "/allocations/{c}"): put})
    with pytest.raises(AllocationUpdateFailed, match="consumer c1"):
        await client.claim("c1", {"allocations": {}}, project_id="p", user_id="u")


async def test_capacity_refusal_is_false_and_consumer_type_at_138(stack: list[Any]) -> None:
    bodies: list[dict[str, Any]] = []

    async def put(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.json_response(
            {"errors": [{"status": 409, "code": "placement.undefined_code", "detail": "no room"}]},
            status=409,
        )

    client, _ = await client_for(stack, {("PUT", "/allocations/{c}"): put})
    ok = await client.claim(
        "c1", {"allocations": {}}, project_id="p", user_id="u", allocation_request_version="1.38"
    )
    assert ok is False and len(bodies) == 1
    assert bodies[0]["consumer_type"] == "INSTANCE"


async def test_move_claim_doubles_up_with_current_generation(stack: list[Any]) -> None:
    bodies: list[dict[str, Any]] = []

    async def get(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "allocations": {"src": {"resources": {"VCPU": 2}, "generation": 3}},
                "consumer_generation": 7,
                "project_id": "p",
                "user_id": "u",
            }
        )

    async def put(request: web.Request) -> web.Response:
        bodies.append(await request.json())
        return web.Response(status=204)

    client, _ = await client_for(
        stack, {("GET", "/allocations/{c}"): get, ("PUT", "/allocations/{c}"): put}
    )
    ar = {"allocations": {"dst": {"resources": {"VCPU": 2}}}}
    assert await client.claim("c1", ar, project_id="p", user_id="u", may_have_allocations=True)
    assert bodies[0]["consumer_generation"] == 7
    assert bodies[0]["allocations"] == {
        "src": {"resources": {"VCPU": 2}},
        "dst": {"resources": {"VCPU": 2}},
    }


async def test_claim_timeout_is_false_and_cleans_up(stack: list[Any]) -> None:
    deleted: list[str] = []
    client, _ = await client_for(
        stack,
        {
            ("PUT", "/allocations/{c}"): claiming_slowly(deleted, 1.0),
            ("GET", "/allocations/{c}"): holding(AR1),
        },
        timeout=0.2,
    )
    assert await client.claim("c9", AR1, project_id="p", user_id="u") is False
    assert deleted == ["c9"]  # it held exactly our claim: undone at the generation read


async def test_connection_dropped_during_claim_is_false_and_cleans_up(stack: list[Any]) -> None:
    deleted: list[str] = []
    puts = 0

    undo = claiming_slowly(deleted)

    async def put(request: web.Request) -> web.StreamResponse:
        nonlocal puts
        if (await request.json())["allocations"] == {}:
            return await undo(request)
        puts += 1
        assert request.transport is not None
        request.transport.close()  # Placement died after reading the request
        await asyncio.sleep(0.1)
        return web.Response(status=204)

    client, _ = await client_for(
        stack, {("PUT", "/allocations/{c}"): put, ("GET", "/allocations/{c}"): holding(AR1)}
    )
    assert await client.claim("c7", AR1, project_id="p", user_id="u") is False
    assert puts <= 2  # aiohttp resends a PUT once on a reused keep-alive socket, no more
    assert deleted == ["c7"]


async def test_resent_claim_that_was_already_applied_counts_as_claimed(
    stack: list[Any],
) -> None:
    """The first PUT is applied but its answer lost; the resend sees a consumer conflict."""
    held: dict[str, Any] = {}

    async def put(request: web.Request) -> web.Response:
        body = await request.json()
        if held:
            return conflict("consumer generation conflict - expected null but got 1")
        held.update(body)
        return conflict("consumer generation conflict - expected null but got 1")

    async def get(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "allocations": {
                    rp: {"resources": a["resources"], "generation": 5}
                    for rp, a in held["allocations"].items()
                },
                "consumer_generation": 1,
                "project_id": held["project_id"],
                "user_id": held["user_id"],
            }
        )

    client, _ = await client_for(
        stack, {("PUT", "/allocations/{c}"): put, ("GET", "/allocations/{c}"): get}
    )
    ar = {"allocations": {"rp1": {"resources": {"VCPU": 1}}}}
    assert await client.claim("c8", ar, project_id="p", user_id="u") is True
    # someone else's allocation under the same consumer is still a real conflict
    with pytest.raises(AllocationUpdateFailed) as err:
        await client.claim("c8", ar, project_id="p", user_id="other-user")
    assert type(err.value) is AllocationUpdateFailed
    # ours elsewhere (a redelivered call's first claim): the held allocation, to adopt
    other = {"allocations": {"rp2": {"resources": {"VCPU": 1}}}}
    with pytest.raises(ConsumerHeld) as held_err:
        await client.claim("c8", other, project_id="p", user_id="u")
    assert held_err.value.held == {"rp1": {"VCPU": 1}}


# ---- delete / rollback ----


async def test_delete_404_is_fine_and_failures_are_loud(
    stack: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    calls: dict[str, int] = {}

    async def get(request: web.Request) -> web.StreamResponse:
        if request.match_info["c"] == "gone":  # Placement: an empty consumer, never a 404
            return web.json_response({"allocations": {}})
        return await holding(AR1)(request)

    async def put(request: web.Request) -> web.Response:
        c = request.match_info["c"]
        calls[c] = calls.get(c, 0) + 1
        if c == "flaky" and calls[c] < 3:
            return web.Response(status=500, text="db down")
        if c == "broken":
            return web.Response(status=500, text="db down")
        return web.Response(status=204)

    client, _ = await client_for(
        stack, {("GET", "/allocations/{c}"): get, ("PUT", "/allocations/{c}"): put}
    )
    await client.delete_allocation("gone")
    assert "gone" not in calls  # nothing held: nothing written
    await client.delete_allocation("flaky")
    assert calls["flaky"] == 3
    with caplog.at_level(logging.ERROR), pytest.raises(AllocationDeleteFailed, match="broken"):
        await client.rollback(["ok1", "broken", "ok2", "ok1"])
    assert calls["broken"] == 4 and calls["ok1"] == 1 and calls["ok2"] == 1
    assert "LEAKED ALLOCATION" in caplog.text and "broken" in caplog.text


# ---- ClaimBatch ----


class RecordingClaimer:
    def __init__(self, fail: set[str]) -> None:
        self.fail = fail
        self.in_flight = 0
        self.max_in_flight = 0
        self.rolled_back: list[str] = []

    async def claim(self, consumer_uuid: str, allocation_request: Any, **kw: Any) -> bool:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        await asyncio.sleep(0.01)
        self.in_flight -= 1
        if consumer_uuid == "explode":
            raise RuntimeError("bug")
        return consumer_uuid not in self.fail

    async def rollback(self, consumer_uuids: Any) -> None:
        self.rolled_back.extend(consumer_uuids)


async def test_claim_batch_bounds_concurrency_and_reports_failures() -> None:
    claimer = RecordingClaimer(fail={"c3"})
    released: list[str] = []

    def release(result: ClaimResult) -> None:
        released.append(result.consumer_uuid)

    batch = ClaimBatch(claimer, concurrency=3, project_id="p", user_id="u")
    for i in range(10):
        batch.submit(f"c{i}", {"allocations": {}}, on_failure=release)
    batch.submit("explode", {"allocations": {}}, on_failure=release)
    results = await batch.wait()
    assert claimer.max_in_flight == 3
    assert [u for u, r in results.items() if not r.ok] == ["c3", "explode"]
    assert isinstance(results["explode"].error, RuntimeError)
    assert sorted(released) == ["c3", "explode"]
    batch.forget("c3")
    batch.submit("c3", {"allocations": {}})
    with pytest.raises(ValueError, match="already has a claim"):
        batch.submit("c1", {})
    await batch.rollback()
    assert sorted(claimer.rolled_back) == sorted(f"c{i}" for i in range(10) if i != 3)


async def test_claim_batch_context_rolls_back_on_error() -> None:
    claimer = RecordingClaimer(fail=set())
    with pytest.raises(KeyError):
        async with ClaimBatch(claimer, concurrency=2, project_id="p", user_id="u") as batch:
            batch.submit("a", {})
            batch.submit("b", {})
            raise KeyError("decision failed")
    assert sorted(claimer.rolled_back) == ["a", "b"]
    assert json.dumps(sorted(claimer.rolled_back))
