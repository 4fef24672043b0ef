"""Real provider-generation conflicts retried, and a Placement that dies mid-test."""

from __future__ import annotations

import asyncio
import uuid as uuidlib
from collections.abc import Iterator

import pytest

from asyncsched.conf.options import Config
from asyncsched.exceptions import AllocationDeleteFailed
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.placement.client import CLAIM_ATTEMPTS, PlacementClient
from asyncsched.placement.errors import PlacementConnectionError
from asyncsched.placement.query import build_resource_request
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration

# Racers per round: one claim each, at once, on one provider. This Placement tries a write
# once (allocation_conflict_retry_count = 1) and a refused try means another racer's write
# landed meanwhile, so a claim is refused at most RACERS - 1 times: with 4 racers the client's
# 4th attempt (CLAIM_ATTEMPTS) always succeeds, however the machine interleaves them.
RACERS = CLAIM_ATTEMPTS
CONFLICT_ROUNDS = 50


@pytest.fixture(scope="module")
def racy_placement() -> Iterator[PlacementServer]:
    """Placement that retries its own generation races only once, so clients see the 409s."""
    server = PlacementServer(workers=4, allocation_conflict_retry_count=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def test_provider_generation_conflicts_are_retried(racy_placement: PlacementServer) -> None:
    async with racy_placement.seeder() as s:
        rp = await s.compute_node("busy", vcpus=256)
    ar = {"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 16}}}}
    claimed: list[str] = []
    # One client never races itself on a provider (it claims one at a time per provider), so
    # the racers are clients of their own, as scheduler processes would be.
    clients = [PlacementClient(racy_placement.options, claim_backoff=0.2) for _ in range(RACERS)]
    await asyncio.gather(*(c.start() for c in clients))
    client = clients[0]
    try:

        def conflicts() -> int:
            return sum(c.health()["claim_conflicts"] for c in clients)

        # Rounds of simultaneous claims on one provider until Placement reports real
        # placement.concurrent_update conflicts that the clients must retry to success. How
        # many rounds that takes depends on how the machine interleaves Placement's 4 workers
        # (5 rounds were not always enough under load): the bound only ends a run that never
        # races. (16 claims a round from 8 clients lost claims to a loaded machine.)
        for _ in range(CONFLICT_ROUNDS):
            consumers = [str(uuidlib.uuid4()) for _ in clients]
            pairs = zip(clients, consumers, strict=True)
            results = await asyncio.gather(
                *(c.claim(u, ar, project_id="p", user_id="u") for c, u in pairs)
            )
            claimed += consumers
            assert all(results)
            if conflicts():
                break
        assert conflicts() > 0
        async with racy_placement.seeder() as s:
            assert (await s.usages(rp))["VCPU"] == len(claimed)
        # One consumer at a time: all of them at once on this provider would be the same race
        # again, which a loaded machine can make outlast the client's 4 attempts (a leak).
        for consumer in claimed:
            await client.rollback([consumer])
        async with racy_placement.seeder() as s:
            assert (await s.usages(rp))["VCPU"] == 0
    finally:
        await asyncio.gather(*(c.close() for c in clients))


async def test_placement_killed_mid_test_gives_clear_errors_quickly() -> None:
    server = PlacementServer(workers=1)
    server.start()
    try:
        async with server.seeder() as s:
            rp = await s.compute_node("doomed")
        async with PlacementClient(server.options, claim_backoff=0.01) as client:
            consumer = str(uuidlib.uuid4())
            ar = {"allocations": {rp: {"resources": {"VCPU": 1}}}}
            assert await client.claim(consumer, ar, project_id="p", user_id="u")
            rr = build_resource_request(RequestSpec(flavor=Flavor(memory_mb=64, vcpus=1)), Config())
            assert await client.get_allocation_candidates(rr)

            server.kill()  # gunicorn and its worker, SIGKILL; keep-alive sockets die with them

            with pytest.raises(PlacementConnectionError, match=server.url):
                await asyncio.wait_for(client.get_allocation_candidates(rr), 15)
            other = str(uuidlib.uuid4())
            assert (
                await asyncio.wait_for(client.claim(other, ar, project_id="p", user_id="u"), 15)
                is False
            )
            with pytest.raises(AllocationDeleteFailed, match=consumer):
                await asyncio.wait_for(client.rollback([consumer]), 15)
            health = client.health()
            assert health["errors"] >= 3 and health["delete_failures"] == 1
            assert "unreachable" in health["last_error"] or "connection" in health["last_error"]

            server.respawn()  # Placement is back: the same client recovers without a restart
            assert await client.get_allocation_candidates(rr)
            await client.rollback([consumer])
            async with server.seeder() as s:
                assert (await s.allocations(consumer))["allocations"] == {}
    finally:
        server.stop()
