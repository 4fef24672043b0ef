"""POST /v1/explain and GET /v1/capacity over a real socket, on a manager over small fakes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry

from asyncsched.admin.explain_api import (
    BadRequest,
    ExplainAPI,
    fields_from_query,
    spec_from_fields,
)
from asyncsched.admin.readiness import ReadyLimits
from asyncsched.admin.server import AdminServer
from asyncsched.common.health import ServiceHealth
from asyncsched.conf.listen import ListenAddress
from asyncsched.scheduling.manager import SchedulerManager
from tests.support.explain_stack import explain_manager, serve_explain
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host


@pytest.fixture
async def served() -> AsyncIterator[tuple[str, FakePlacement]]:
    mgr, placement = explain_manager()
    runner, url = await serve_explain(mgr)
    try:
        yield url, placement
    finally:
        await runner.cleanup()


async def test_explain_names_the_disabled_host_and_claims_nothing(
    served: tuple[str, FakePlacement],
) -> None:
    url, placement = served
    body = {"vcpus": 1, "ram": 1024, "disk": 10, "host": "cmp1"}
    async with aiohttp.ClientSession() as s, s.post(f"{url}/v1/explain", json=body) as r:
        assert r.status == 200
        out = await r.json()
    assert out["host"] == {
        "host": "cmp1",
        "verdict": "rejected",
        "rank": None,
        "step": "ComputeFilter",
        "reason": "disabled",
        "failed": [{"step": "ComputeFilter", "reason": "disabled"}],
        "limit": None,
    }
    assert out["outcome"] == "ok" and out["claimed"] is False
    assert out["selections"][0]["host"] in {"cmp0", "cmp2"}
    assert placement.claims == [] and placement.allocations == {}


async def test_capacity_query_and_bad_requests(served: tuple[str, FakePlacement]) -> None:
    url, _ = served
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{url}/v1/capacity?vcpus=1&ram=1024&disk=10") as r:
            assert r.status == 200
            out = await r.json()
        assert out["total"] == 2 * 8 and out["excluded"] == {"ComputeFilter: disabled": 1}
        async with s.get(f"{url}/v1/capacity?vcpus=x") as r:
            assert r.status == 400 and "vcpus" in (await r.json())["error"]
        async with s.get(f"{url}/v1/capacity?colour=red") as r:
            assert r.status == 400
        body = {"ram": 1024, "disk": 10, "image_properties": {"hw_architecture": "x86_64"}}
        async with s.post(f"{url}/v1/capacity", json=body) as r:
            assert r.status == 200
            out = await r.json()
        # the image property reaches the filters: these hosts declare no architectures
        assert out["total"] == 0 and "ImagePropertiesFilter" in " ".join(out["excluded"])
        async with s.post(f"{url}/v1/capacity", json=[1]) as r:
            assert r.status == 400 and "object" in (await r.json())["error"]
        async with s.post(f"{url}/v1/explain", data=b"not json") as r:
            assert r.status == 400
        async with s.post(f"{url}/v1/explain", json={"request_spec": {"flavor": 3}}) as r:
            assert r.status == 400 and "request_spec" in (await r.json())["error"]


def test_flavor_words_become_the_request_a_conductor_would_send() -> None:
    fields = fields_from_query(
        [
            ("vcpus", "2"),
            ("ram", "4096"),
            ("disk", "40"),
            ("extra_spec", "hw:cpu_policy=dedicated"),
            ("extra_spec", "trait:CUSTOM_X=required"),
            ("image_prop", "hw_architecture=x86_64"),
            ("image_prop", "hw_numa_nodes=2"),
            ("hint", "same_host=abc"),
            ("az", "east"),
        ]
    )
    spec = spec_from_fields({**fields, "num_instances": 3, "project_id": "p"})
    f = spec.flavor
    assert (f.vcpus, f.memory_mb, f.root_gb) == (2, 4096, 40)
    assert dict(f.extra_specs) == {"hw:cpu_policy": "dedicated", "trait:CUSTOM_X": "required"}
    assert spec.image_props.hw_architecture == "x86_64" and spec.image_props.hw_numa_nodes == 2
    assert spec.scheduler_hints == {"same_host": ("abc",)}
    assert (spec.availability_zone, spec.num_instances, spec.project_id) == ("east", 3, "p")
    with pytest.raises(BadRequest, match="KEY=VALUE"):
        fields_from_query([("hint", "novalue")])
    with pytest.raises(BadRequest, match="negative"):
        spec_from_fields({"ram": -1})


async def test_routes_sit_behind_the_admin_token(tmp_path: Path) -> None:
    hosts = [host()]
    mgr = SchedulerManager(config(), FakeCache(hosts), FakePlacement(hosts), clock=lambda: NOW)
    server = AdminServer(
        ListenAddress("127.0.0.1", 0),
        health=lambda: ServiceHealth("running", {}),
        limits=ReadyLimits(max_state_age=30.0),
        registry=CollectorRegistry(),
        token="s3cret",
        extra_routes=ExplainAPI(mgr).routes(),
    )
    await server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/v1/capacity?ram=512"
        async with aiohttp.ClientSession() as s:
            async with s.get(url) as r:
                assert r.status == 401
            headers: Any = {"Authorization": "Bearer s3cret"}
            async with s.get(url, headers=headers) as r:
                assert r.status == 200 and (await r.json())["total"] > 0
    finally:
        await server.close()
