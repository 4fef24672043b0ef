"""Claims sharing POST /allocations against the real Placement: what it holds is what we say."""

from __future__ import annotations

import asyncio
import uuid as uuidlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from asyncsched.exceptions import AllocationUpdateFailed
from asyncsched.placement.client import PlacementClient
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration


@pytest.fixture
async def client(placement_server: PlacementServer) -> AsyncIterator[PlacementClient]:
    async with PlacementClient(
        placement_server.options, claim_backoff=0.05, claim_batch_size=32, claim_writes_in_flight=1
    ) as c:
        yield c


def alloc(rp: str, vcpus: int = 1) -> dict[str, Any]:
    return {"allocations": {rp: {"resources": {"VCPU": vcpus, "MEMORY_MB": 128}}}}


def new_uuids(n: int) -> list[str]:
    return [str(uuidlib.uuid4()) for _ in range(n)]


async def test_concurrent_claims_share_posts_and_placement_holds_each(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    async with placement_server.seeder() as s:
        rps = await s.compute_nodes(24, prefix=f"co-{uuidlib.uuid4().hex[:6]}")
    consumers = new_uuids(24)
    results = await asyncio.gather(
        *(
            client.claim(c, alloc(rp), project_id="proj", user_id="user")
            for c, rp in zip(consumers, rps, strict=True)
        )
    )
    assert results == [True] * 24
    stats = client.health()["claim_batches"]
    assert stats["posts"] >= 1 and stats["posted"] >= 2, stats
    assert stats["posted"] + stats["alone"] == 24 and stats["refused"] == 0
    async with placement_server.seeder() as s:
        for c, rp in zip(consumers, rps, strict=True):
            got = await s.allocations(c)
            assert got["project_id"] == "proj" and got["user_id"] == "user"
            assert got["allocations"][rp]["resources"] == {"VCPU": 1, "MEMORY_MB": 128}
    await client.rollback(consumers)
    async with placement_server.seeder() as s:
        assert [(await s.usages(rp))["VCPU"] for rp in rps] == [0] * 24


async def test_one_claim_over_capacity_fails_alone_and_the_others_land(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = uuidlib.uuid4().hex[:6]
    async with placement_server.seeder() as s:
        rps = await s.compute_nodes(5, prefix=f"ok-{t}")
        small = await s.compute_node(f"small-{t}", vcpus=1, cpu_allocation_ratio=1.0)
    busy = client.claim(str(uuidlib.uuid4()), alloc(rps[0]), project_id="p", user_id="u")
    consumers = new_uuids(5)
    wanted = [(consumers[i], alloc(rps[i + 1])) for i in range(4)]
    wanted.insert(2, (consumers[4], alloc(small, vcpus=2)))  # 2 VCPU on a 1-VCPU provider
    results = await asyncio.gather(
        busy, *(client.claim(c, a, project_id="p", user_id="u") for c, a in wanted)
    )
    assert results == [True, True, True, False, True, True]
    stats = client.health()["claim_batches"]
    assert stats["refused"] >= 1, stats  # the shared POST was refused, then each went alone
    async with placement_server.seeder() as s:
        assert (await s.allocations(consumers[4]))["allocations"] == {}
        assert (await s.usages(small))["VCPU"] == 0
        for c in consumers[:4]:
            assert (await s.allocations(c))["allocations"]


async def test_a_consumer_placement_already_holds_is_recognised_inside_a_batch(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    """A redelivered call's consumer: the shared POST is refused (consumer generation), the
    same allocation again counts as made, another allocation for it is refused, and the
    other members land."""
    t = uuidlib.uuid4().hex[:6]
    async with placement_server.seeder() as s:
        rps = await s.compute_nodes(6, prefix=f"held-{t}")
    same, other = new_uuids(2)
    assert await client.claim(same, alloc(rps[0]), project_id="p", user_id="u")
    async with PlacementClient(placement_server.options) as elsewhere:  # another project's
        assert await elsewhere.claim(other, alloc(rps[1]), project_id="q", user_id="v")
    fresh = new_uuids(3)
    results = await asyncio.gather(
        client.claim(str(uuidlib.uuid4()), alloc(rps[2]), project_id="p", user_id="u"),
        client.claim(same, alloc(rps[0]), project_id="p", user_id="u"),
        client.claim(other, alloc(rps[3]), project_id="p", user_id="u"),
        *(
            client.claim(c, alloc(rp), project_id="p", user_id="u")
            for c, rp in zip(fresh, rps[3:], strict=True)
        ),
        return_exceptions=True,
    )
    assert results[0] is True and results[1] is True
    assert isinstance(results[2], AllocationUpdateFailed)
    assert results[3:] == [True, True, True]
    async with placement_server.seeder() as s:
        held = await s.allocations(other)
        assert list(held["allocations"]) == [rps[1]] and held["project_id"] == "q"
        assert (await s.usages(rps[0]))["VCPU"] == 1  # not claimed twice
