"""A rollback while the real Placement is down: kept, journaled, retried once it is back.

Each test runs its own Placement (gunicorn + PostgreSQL database) so it can kill and restart
it without touching anyone else's. The client and the Placement component are the daemon's
own (``PlacementClient.from_config``, ``PlacementComponent``), with ``[asyncsched]
state_dir`` in a temporary directory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from asyncsched.app import PlacementComponent
from asyncsched.conf.options import Config
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.pending import JOURNAL_NAME
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration

CLAIM = {"VCPU": 1, "MEMORY_MB": 256}


@pytest.fixture
def own_placement() -> Iterator[PlacementServer]:
    with PlacementServer(workers=1) as server:
        yield server


def daemon_client(server: PlacementServer, state_dir: Path) -> PlacementClient:
    base = Config()
    config = dataclasses.replace(
        base,
        placement=server.options,
        asyncsched=dataclasses.replace(base.asyncsched, state_dir=str(state_dir)),
    )
    client = PlacementClient.from_config(config)
    assert client.pending is not None
    client.pending.retry_max = 1.0  # retry each second, so the test does not wait long
    return client


def journaled(state_dir: Path) -> list[str]:
    path = state_dir / JOURNAL_NAME
    if not path.exists():
        return []
    return [e["consumer_uuid"] for e in json.loads(path.read_text())["pending"]]


async def held(server: PlacementServer, consumer: str) -> dict[str, object]:
    async with server.seeder() as s:
        return dict((await s.allocations(consumer))["allocations"])


async def claim_then_fail_rollback(
    server: PlacementServer, client: PlacementClient
) -> tuple[str, str]:
    async with server.seeder() as s:
        rp = await s.compute_node(f"cn-{uuidlib.uuid4().hex[:8]}")
    consumer = str(uuidlib.uuid4())
    ar = {"allocations": {rp: {"resources": CLAIM}}}
    assert await client.claim(consumer, ar, project_id="p", user_id="u")
    server.kill()  # Placement dies before the request's rollback
    await asyncio.wait_for(client.rollback([consumer]), 30)  # kept, not raised
    return consumer, rp


async def test_a_rollback_during_an_outage_is_done_when_placement_returns(
    own_placement: PlacementServer, tmp_path: Path
) -> None:
    client = daemon_client(own_placement, tmp_path)
    component = PlacementComponent(client)
    await component.start()
    try:
        consumer, _ = await claim_then_fail_rollback(own_placement, client)
        assert client.health()["pending_rollbacks"]["pending"] == 1
        assert journaled(tmp_path) == [consumer]
        await asyncio.sleep(2.5)  # retries fail while Placement is down: still kept
        assert client.health()["pending_rollbacks"]["pending"] == 1

        own_placement.respawn()
        async with asyncio.timeout(30):
            while client.health()["pending_rollbacks"]["pending"]:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        assert await held(own_placement, consumer) == {}
        assert journaled(tmp_path) == []
    finally:
        await component.close()


async def test_the_journal_survives_a_daemon_restart(
    own_placement: PlacementServer, tmp_path: Path
) -> None:
    first = PlacementComponent(daemon_client(own_placement, tmp_path))
    await first.start()
    try:
        consumer, _ = await claim_then_fail_rollback(own_placement, first.client)
    finally:
        await first.close()  # the daemon stops with the rollback still to do
    assert journaled(tmp_path) == [consumer]

    own_placement.respawn()
    assert await held(own_placement, consumer)  # the allocation is still there
    second = PlacementComponent(daemon_client(own_placement, tmp_path))
    await second.start()  # a new daemon: replays the journal
    try:
        async with asyncio.timeout(30):
            while await held(own_placement, consumer):  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        async with asyncio.timeout(10):
            while journaled(tmp_path):  # noqa: ASYNC110
                await asyncio.sleep(0.1)
        assert second.client.health()["pending_rollbacks"]["done"] == 1
    finally:
        await second.close()
