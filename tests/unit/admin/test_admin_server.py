"""AdminServer over a real socket: probes, token, status JSON, metrics text, extra routes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from asyncsched.admin.readiness import ReadyLimits
from asyncsched.admin.server import AdminServer, read_token
from asyncsched.common.health import ServiceHealth
from asyncsched.conf.listen import ListenAddress
from asyncsched.exceptions import ConfigError
from tests.support import health

LIMITS = ReadyLimits(max_state_age=30.0)


def ready_snapshot(state: str = "running") -> ServiceHealth:
    db = health.database(loaded=True, age=1.0, last_error=None)
    return health.service(
        state,
        rpc=health.rpc(connected=True, accepting=True),
        hoststate=health.host_state(api=db, cells={"c1": health.cell("cell1", age=1.0)}),
    )


@dataclass
class Shown:
    """What the server's health source returns now (a test swaps it)."""

    snap: ServiceHealth

    def with_state(self, state: str) -> None:
        self.snap = ServiceHealth(state, self.snap.components)


class Probe:
    def __init__(self) -> None:
        self.error: Exception | None = None
        self.calls = 0
        self.delay = 0.0

    async def __call__(self) -> None:
        self.calls += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error


@pytest.fixture
def snapshot() -> Shown:
    return Shown(ready_snapshot())


@pytest.fixture
def probe() -> Probe:
    return Probe()


async def _explain(request: web.Request) -> web.Response:
    return web.json_response({"echo": await request.json()})


@pytest.fixture
async def server(snapshot: Shown, probe: Probe) -> AsyncIterator[AdminServer]:
    registry = CollectorRegistry()
    Counter("asyncsched_test_things", "things", registry=registry).inc(3)

    def health() -> ServiceHealth:
        return snapshot.snap

    srv = AdminServer(
        ListenAddress("127.0.0.1", 0),
        health=health,
        limits=LIMITS,
        registry=registry,
        token="s3cret",
        placement_probe=probe,
        placement_timeout=0.2,
        extra_routes=[web.post("/v1/explain", _explain)],
    )
    await srv.start()
    try:
        yield srv
    finally:
        await srv.close()


async def get(
    srv: AdminServer, path: str, token: str | None = "s3cret", method: str = "GET", **kw: Any
) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session:
        async with session.request(
            method, f"http://127.0.0.1:{srv.port}{path}", headers=headers, **kw
        ) as resp:
            return resp.status, await resp.text()


async def test_healthz_needs_no_token_everything_else_does(server: AdminServer) -> None:
    assert await get(server, "/healthz", token=None) == (200, "ok\n")
    for path in ("/readyz", "/v1/status", "/metrics"):
        assert (await get(server, path, token=None))[0] == 401
        assert (await get(server, path, token="wrong"))[0] == 401
        assert (await get(server, path))[0] == 200
    status, _ = await get(server, "/v1/explain", token=None, method="POST", json={"a": 1})
    assert status == 401
    assert server.health()["denied"] == 7


async def test_extra_routes_are_mounted(server: AdminServer) -> None:
    status, body = await get(server, "/v1/explain", method="POST", json={"a": 1})
    assert status == 200 and json.loads(body) == {"echo": {"a": 1}}


async def test_metrics_is_the_registry_in_text_format(server: AdminServer) -> None:
    status, body = await get(server, "/metrics")
    assert status == 200
    assert "asyncsched_test_things_total 3.0" in body


async def test_readyz_flips_with_the_snapshot_and_the_placement_probe(
    server: AdminServer, snapshot: Shown, probe: Probe
) -> None:
    assert await get(server, "/readyz") == (200, "ready\n")
    ready = snapshot.snap
    down = health.rpc(connected=False, last_error="connection refused")
    snapshot.snap = health.with_part(ready, rpc=down)
    status, body = await get(server, "/readyz")
    assert status == 503 and "rpc: not connected to RabbitMQ (connection refused)" in body
    snapshot.snap = ready
    await asyncio.sleep(1.05)  # past the probe cache
    probe.error = ConnectionError("Placement unreachable at http://x")
    status, body = await get(server, "/readyz")
    assert status == 503 and "placement: unreachable: Placement unreachable at http://x" in body
    probe.error = None
    await asyncio.sleep(1.05)
    assert await get(server, "/readyz") == (200, "ready\n")


async def test_a_hung_placement_is_unreachable_after_the_probe_timeout(
    server: AdminServer, probe: Probe
) -> None:
    probe.delay = 5.0
    status, body = await get(server, "/readyz")
    assert status == 503 and "no answer within 0.2 s" in body


async def test_concurrent_probes_share_one_placement_call(
    server: AdminServer, probe: Probe
) -> None:
    probe.delay = 0.1
    results = await asyncio.gather(*(get(server, "/readyz") for _ in range(5)))
    assert all(r == (200, "ready\n") for r in results)
    assert probe.calls == 1


async def test_status_is_the_snapshot_with_the_verdict(
    server: AdminServer, snapshot: Shown
) -> None:
    snapshot.with_state("stopping")
    status, body = await get(server, "/v1/status")
    doc = json.loads(body)
    assert status == 200
    assert doc["ready"] is False and doc["not_ready"] == ["service is stopping"]
    assert doc["components"]["rpc"] == health.rpc(connected=True, accepting=True).as_json()


async def test_a_slow_admin_client_does_not_hold_the_loop(server: AdminServer) -> None:
    # A client that opens a connection and never finishes its request must not stop others.
    _reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    await writer.drain()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        for _ in range(10):
            await asyncio.sleep(0.01)
            ticks += 1

    await asyncio.wait_for(asyncio.gather(ticker(), get(server, "/healthz")), 2.0)
    assert ticks == 10
    writer.close()


async def test_port_in_use_is_a_config_error(server: AdminServer) -> None:
    other = AdminServer(
        ListenAddress("127.0.0.1", server.port or 0),
        health=ready_snapshot,
        limits=LIMITS,
        registry=CollectorRegistry(),
    )
    with pytest.raises(ConfigError, match="admin_listen"):
        await other.start()
    await other.close()


def test_read_token(tmp_path: Path) -> None:
    assert read_token(None) is None
    (tmp_path / "t").write_text("  abc\n")
    assert read_token(str(tmp_path / "t")) == "abc"
    (tmp_path / "e").write_text("\n")
    with pytest.raises(ConfigError, match="empty"):
        read_token(str(tmp_path / "e"))
    with pytest.raises(ConfigError, match="admin_token_file"):
        read_token(str(tmp_path / "missing"))


async def test_placement_is_not_probed_before_the_service_runs(
    server: AdminServer, snapshot: Shown, probe: Probe
) -> None:
    snapshot.with_state("starting")
    probe.error = ConnectionError("PlacementClient used before start()")
    assert await get(server, "/readyz") == (503, "service is starting\n")
    assert probe.calls == 0
