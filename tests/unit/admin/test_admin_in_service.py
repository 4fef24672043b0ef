"""The admin endpoint as the first component of a Service: probes answer while a later
component is still starting, and while the service drains."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client import CollectorRegistry

from asyncsched.admin.readiness import ReadyLimits
from asyncsched.admin.server import AdminServer
from asyncsched.common.health import Snapshot
from asyncsched.conf.listen import ListenAddress
from asyncsched.conf.options import Config
from asyncsched.service import Service
from tests.support.health import Nothing


class Gate:
    """A component whose start and drain wait until the test opens them."""

    name = "gate"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.draining = asyncio.Event()
        self.drained = asyncio.Event()

    async def start(self) -> None:
        self.started.set()
        await self.release.wait()

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109
        self.draining.set()
        await self.drained.wait()

    async def close(self) -> None:
        return None

    def health(self) -> Snapshot:
        return Nothing()


async def readyz(port: int | None) -> tuple[int, str]:
    """/readyz's answer, after checking /healthz says alive."""
    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
            assert resp.status == 200
        async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
            return resp.status, await resp.text()


async def test_probes_during_start_and_drain() -> None:
    gate = Gate()
    admin = AdminServer(
        ListenAddress("127.0.0.1", 0),
        health=lambda: service.health(),
        limits=ReadyLimits(60.0),
        registry=CollectorRegistry(),
    )
    service = Service(Config(), [admin, gate])
    starting = asyncio.create_task(service.start())
    await asyncio.wait_for(gate.started.wait(), 5)
    status, body = await readyz(admin.port)
    assert status == 503 and body.startswith("service is starting\n")
    gate.release.set()
    await starting
    status, body = await readyz(admin.port)
    assert status == 503 and "service is" not in body  # running; no consumers here
    stopping = asyncio.create_task(service.stop())
    await asyncio.wait_for(gate.draining.wait(), 5)
    status, body = await readyz(admin.port)
    assert status == 503 and body.startswith("service is stopping\n")
    gate.drained.set()
    await stopping
    assert admin.port is not None and not admin.health()["serving"]
