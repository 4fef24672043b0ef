"""Fencing against the real Placement: two processes on one consumer (issue #21 item 7).

Process A claims an instance and loses its broker connection; process B gets the redelivered
call and takes A's allocation over (re-written at the consumer generation it read). A's undo
(batch rollback, guard back-out, pending retry: all go through ``undo_once``) carries the
generation A's own write left, so Placement refuses it and the allocation stays. B's undo of
what it took over works like any claim's, and puts a move's source allocation back.
"""

from __future__ import annotations

import logging
import uuid as uuidlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from asyncsched.exceptions import ConsumerHeld
from asyncsched.placement.claims import ClaimBatch
from asyncsched.placement.client import NEW_CONSUMER_GENERATION, PlacementClient
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration

SMALL = {"VCPU": 1, "MEMORY_MB": 256}


def on(rp: str) -> dict[str, Any]:
    return {"allocations": {rp: {"resources": dict(SMALL)}}}


@pytest.fixture
async def rps(placement_server: PlacementServer) -> list[str]:
    async with placement_server.seeder() as s:
        return await s.compute_nodes(3, prefix=f"fence-{uuidlib.uuid4().hex[:6]}")


@pytest.fixture
async def two(placement_server: PlacementServer) -> AsyncIterator[list[PlacementClient]]:
    async with (
        PlacementClient(placement_server.options, claim_backoff=0.05) as a,
        PlacementClient(placement_server.options, claim_backoff=0.05) as b,
    ):
        yield [a, b]


async def held(server: PlacementServer, consumer: str) -> tuple[dict[str, Any], int | None]:
    async with server.seeder() as s:
        got = await s.allocations(consumer)
    allocs = {rp: a["resources"] for rp, a in got["allocations"].items()}
    return allocs, got.get("consumer_generation")


async def adopt(b: PlacementClient, consumer: str, rp: str, **kw: Any) -> ConsumerHeld:
    """What process B's manager does with a redelivered call: its claim meets A's, held."""
    with pytest.raises(ConsumerHeld) as err:
        await b.claim(consumer, on(rp), project_id="p", user_id="u")
    assert err.value.generation is not None
    return err.value


async def test_a_new_consumers_first_write_leaves_the_generation_the_client_assumes(
    placement_server: PlacementServer, two: list[PlacementClient], rps: list[str]
) -> None:
    a, _ = two
    consumer = str(uuidlib.uuid4())
    assert await a.claim(consumer, on(rps[0]), project_id="p", user_id="u")
    assert (await held(placement_server, consumer))[1] == NEW_CONSUMER_GENERATION


async def test_the_stale_process_cannot_delete_what_another_took_over(
    placement_server: PlacementServer,
    two: list[PlacementClient],
    rps: list[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = two
    consumer = str(uuidlib.uuid4())
    assert await a.claim(consumer, on(rps[0]), project_id="p", user_id="u")
    err = await adopt(b, consumer, rps[1])
    assert await b.take_over(
        consumer, on(rps[0]), generation=err.generation or 0, project_id="p", user_id="u"
    )
    with caplog.at_level(logging.WARNING, logger="asyncsched.placement.client"):
        await a.rollback([consumer])  # A runs on and rolls its batch back
    assert "not undoing our claim of" in caplog.text
    assert a.health()["fenced"] == 1
    allocs, gen = await held(placement_server, consumer)
    assert allocs == {rps[0]: SMALL} and gen == NEW_CONSUMER_GENERATION + 1  # left as it is
    await b.rollback([consumer])  # B's undo of what it took over: done
    assert (await held(placement_server, consumer))[0] == {}


async def test_an_adopted_allocation_is_rolled_back_with_its_call(
    placement_server: PlacementServer, two: list[PlacementClient], rps: list[str]
) -> None:
    a, b = two
    first, adopted = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    assert await a.claim(adopted, on(rps[2]), project_id="p", user_id="u")  # A then "dies"
    batch = ClaimBatch(b, concurrency=4, project_id="p", user_id="u")
    batch.submit(first, on(rps[0]))
    err = await adopt(b, adopted, rps[1])
    assert batch.take_over(adopted, on(rps[2]), err.generation or 0, {})
    assert all(r.ok for r in (await batch.wait()).values())
    assert await batch.rollback() == 2  # a later instance of the call failed: both go
    assert (await held(placement_server, adopted))[0] == {}
    assert (await held(placement_server, first))[0] == {}
    await a.rollback([adopted])  # A's stale undo meets a consumer that is gone: refused
    assert a.health()["fenced"] == 1


async def test_undoing_a_move_claim_puts_the_source_back_at_its_generation(
    placement_server: PlacementServer, two: list[PlacementClient], rps: list[str]
) -> None:
    a, b = two
    instance = str(uuidlib.uuid4())
    assert await a.claim(instance, on(rps[0]), project_id="p", user_id="u")  # the source
    assert await b.claim(
        instance, on(rps[1]), project_id="p", user_id="u", may_have_allocations=True
    )
    allocs, gen = await held(placement_server, instance)
    assert allocs == {rps[0]: SMALL, rps[1]: SMALL}  # nova's doubled-up claim
    await b.rollback([instance])
    assert (await held(placement_server, instance)) == ({rps[0]: SMALL}, (gen or 0) + 1)
    await a.rollback([instance])  # a stale undo of the source's first claim: refused
    assert (await held(placement_server, instance))[0] == {rps[0]: SMALL}
    assert a.health()["fenced"] == 1
