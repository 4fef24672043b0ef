"""Concurrent claims of several schedulers on one tight provider, against the real Placement.

Placement 16.0.0 on PostgreSQL accepts concurrent ``PUT /allocations`` on one provider beyond
its capacity (issue #13: 15 of 20 rounds). Each PlacementClient here stands for one scheduler
process (a client never races itself: it claims one at a time per provider). With the guard
off the race shows; with it on, no round ends over capacity and what the clients report
claimed is exactly what Placement holds, whether the guard reads usage through Placement's API
or (with the Placement mirror configured) straight from Placement's database.
"""

from __future__ import annotations

import asyncio
import random
import uuid as uuidlib
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from asyncsched.exceptions import PlacementError
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.overcommit import OvercommitGuard
from asyncsched.placement.usage import ProviderUsage, UsageSource
from asyncsched.scheduling.candidates.guard_usage import DatabaseUsage, HoldingsReader
from asyncsched.state.placement_mirror.usage import ProviderUsageReader
from tests.support.nova_db import BACKENDS, Backend, url_for
from tests.support.placement_server import PlacementServer

# Placement's database on PostgreSQL and on MariaDB (issue #25): the guard's usage and
# write-order reads are each dialect's own statements.
pytestmark = [
    pytest.mark.integration,
    pytest.mark.parametrize("db_backend", BACKENDS, scope="module"),
]

ROUNDS = 20
RACERS = 3
CLAIM = {"VCPU": 1, "MEMORY_MB": 64}


@pytest.fixture(scope="module")
def busy_placement(db_backend: Backend) -> Iterator[PlacementServer]:
    """4 gunicorn workers, so concurrent PUTs really run side by side."""
    with PlacementServer(workers=4, db_backend=db_backend) as server:
        yield server


@pytest_asyncio.fixture
async def schedulers(
    busy_placement: PlacementServer, request: pytest.FixtureRequest
) -> AsyncIterator[list[PlacementClient]]:
    guard: str = request.param  # "off", "api" or "db"
    clients = [
        PlacementClient(busy_placement.options, claim_backoff=0.05, overcommit_guard=guard != "off")
        for _ in range(RACERS)
    ]
    readers: list[ProviderUsageReader] = []
    for c in clients:
        if c.guard is not None:
            c.guard.backoff = 0.3  # a shorter race window keeps the test short
            if guard in ("db", "ranked"):
                readers.append(reader_for(busy_placement))
                ranks = (
                    HoldingsReader(dsn(busy_placement), timeout=5.0) if guard == "ranked" else None
                )
                c.guard.usages = DatabaseUsage(readers[-1], c, ranks)
    await asyncio.gather(*(c.start() for c in clients))
    try:
        yield clients
    finally:
        await asyncio.gather(*(c.close() for c in clients), *(r.close() for r in readers))


def dsn(server: PlacementServer) -> str:
    return url_for(server.db_name, backend=server.db_backend)


def reader_for(server: PlacementServer) -> ProviderUsageReader:
    return ProviderUsageReader(dsn(server), timeout=5.0)


async def race_rounds(
    server: PlacementServer, clients: list[PlacementClient], rounds: int, stop_on_over: bool
) -> tuple[int, int]:
    """Rounds of RACERS claims for the last free VCPU of a fresh provider.

    Returns (rounds that ended over capacity, rounds in which one claim was kept).
    """
    over = kept = 0
    for r in range(rounds):
        async with server.seeder() as s:
            # 2 VCPUs, one already used by an old instance: exactly one more fits
            rp = await s.compute_node(
                f"tight-{uuidlib.uuid4().hex[:8]}", vcpus=2, cpu_allocation_ratio=1.0
            )
            old = str(uuidlib.uuid4())
            status, _ = await s.call(
                "PUT",
                f"/allocations/{old}",
                {
                    "allocations": {rp: {"resources": CLAIM}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                },
                version="1.28",
            )
            assert status == 204
        consumers = [str(uuidlib.uuid4()) for _ in clients]
        ar = {"allocations": {rp: {"resources": CLAIM}}}
        results = await asyncio.gather(
            *(
                c.claim(u, ar, project_id="p", user_id="u")
                for c, u in zip(clients, consumers, strict=True)
            )
        )
        async with server.seeder() as s:
            used = (await s.usages(rp))["VCPU"]
            held = [bool((await s.allocations(u))["allocations"]) for u in consumers]
        # what each scheduler reports is what Placement holds, whatever the guard did
        assert held == list(results), (r, results, held)
        assert used == 1 + sum(results)
        over += used > 2
        kept += sum(results) == 1
        if over and stop_on_over:
            break
    return over, kept


@pytest.mark.parametrize("schedulers", ["off"], indirect=True, ids=["guard-off"])
async def test_without_the_guard_concurrent_claims_overcommit(
    busy_placement: PlacementServer, schedulers: list[PlacementClient]
) -> None:
    over, _ = await race_rounds(busy_placement, schedulers, ROUNDS, stop_on_over=True)
    assert over, f"Placement never overcommitted in {ROUNDS} rounds: this test shows nothing"


@pytest.mark.parametrize("schedulers", ["api", "db"], indirect=True, ids=["guard-api", "guard-db"])
async def test_with_the_guard_no_round_ends_over_capacity(
    busy_placement: PlacementServer, schedulers: list[PlacementClient]
) -> None:
    over, kept = await race_rounds(busy_placement, schedulers, ROUNDS, stop_on_over=False)
    assert over == 0
    raced = sum(c.health()["overcommit_guard"]["raced"] for c in schedulers)
    backed_out = sum(c.health()["overcommit_guard"]["backed_out"] for c in schedulers)
    # the race happened and the guard resolved it (not a quiet Placement)
    assert raced > 0 and backed_out > 0, (raced, backed_out)
    # usually one of the racers keeps the slot; both backing out loses it, never overfills it
    assert kept >= ROUNDS // 2, f"the free slot was kept in only {kept} of {ROUNDS} rounds"


class NoPause(random.Random):
    """Racers whose random pauses come out equal: they look again at the same instant."""

    def uniform(self, a: float, b: float) -> float:
        return a


class InStep:
    """A usage source whose reads finish together across the racers: each read waits at a
    barrier until every racer has made its read too, so both looks of two unranked guards
    see the provider before either backs out, however the machine schedules them."""

    def __init__(self, inner: UsageSource, barrier: asyncio.Barrier) -> None:
        self._inner = inner
        self._barrier = barrier

    async def provider_usage(self, provider_uuid: str) -> ProviderUsage:
        got = await self._inner.provider_usage(provider_uuid)
        await asyncio.wait_for(self._barrier.wait(), 30.0)
        return got


@pytest.mark.parametrize("ranked", [False, True], ids=["unranked", "ranked"])
async def test_two_racers_for_one_slot_end_with_exactly_one_placed(
    busy_placement: PlacementServer, ranked: bool
) -> None:
    """Two schedulers' claims both accepted on a provider that holds one (the race's outcome,
    made here for certain: two claims on 2 VCPUs, then 1 reserved), each confirmed by its own
    guard at the same instant. Unranked, both look again at once, both see the provider over
    and both back out: the slot is lost (what the ranks fix; on the old code this is what the
    ranked case did too; the racers' reads are held in step so that both looks of each see
    the other's claim still there, the outcome the test pins). Ranked by Placement's write
    order, the newer backs out at once and the older keeps the slot."""
    async with busy_placement.seeder() as s:
        rp = await s.compute_node(
            f"two-{uuidlib.uuid4().hex[:8]}", vcpus=2, cpu_allocation_ratio=1.0
        )
    clients = [PlacementClient(busy_placement.options) for _ in range(2)]
    readers = [reader_for(busy_placement) for _ in clients]
    ranks = [HoldingsReader(dsn(busy_placement), timeout=5.0) for _ in clients]
    await asyncio.gather(*(c.start() for c in clients))
    try:
        consumers = [str(uuidlib.uuid4()) for _ in clients]
        ar = {"allocations": {rp: {"resources": CLAIM}}}
        for c, u in zip(clients, consumers, strict=True):
            assert await c.claim(u, ar, project_id="p", user_id="u")
        async with busy_placement.seeder() as s:
            status, inv = await s.call("GET", f"/resource_providers/{rp}/inventories")
            inv["inventories"]["VCPU"]["reserved"] = 1
            status, _ = await s.call("PUT", f"/resource_providers/{rp}/inventories", inv)
            assert status == 200
        barrier = asyncio.Barrier(len(clients))
        guards = [
            OvercommitGuard(
                DatabaseUsage(r, c, k) if ranked else InStep(DatabaseUsage(r, c), barrier),
                c.delete_allocation,
                backoff=1.0 if ranked else 0.3,  # ranked: 3 looks for the newer's DELETE
                rng=NoPause(),
            )
            for c, r, k in zip(clients, readers, ranks, strict=True)
        ]
        kept = await asyncio.gather(
            *(g.confirm(u, ar) for g, u in zip(guards, consumers, strict=True))
        )
        async with busy_placement.seeder() as s:
            used = (await s.usages(rp)).get("VCPU", 0)
            held = [bool((await s.allocations(u))["allocations"]) for u in consumers]
        assert held == kept  # what each scheduler believes is what Placement holds
        assert used == sum(kept) <= 1  # never over capacity
        if ranked:
            assert kept == [True, False]  # the older claim keeps the slot
        else:
            assert kept == [False, False]  # the slot is lost
    finally:
        await asyncio.gather(
            *(c.close() for c in clients),
            *(r.close() for r in readers),
            *(k.close() for k in ranks),
        )


async def test_holdings_are_placements_usage_in_write_order(
    busy_placement: PlacementServer,
) -> None:
    """The ranked read gives the API's usage and the consumers in the order their claims were
    written (a consumer's claim written again moves it last); an unknown provider is None."""
    ranks = HoldingsReader(dsn(busy_placement), timeout=5.0)
    async with PlacementClient(busy_placement.options) as client:
        try:
            async with busy_placement.seeder() as s:
                rp = await s.compute_node(f"order-{uuidlib.uuid4().hex[:8]}", vcpus=8)
            consumers = [str(uuidlib.uuid4()) for _ in range(3)]
            for i, u in enumerate(consumers):
                ar = {"allocations": {rp: {"resources": {"VCPU": 1 + i, "MEMORY_MB": 64}}}}
                assert await client.claim(u, ar, project_id="p", user_id="u")
            got = await ranks.read(rp)
            assert got is not None
            assert got.usage == await client.provider_usage(rp)
            assert [c for c, _ in got.consumers] == consumers
            assert got.consumers[2][1] == {"VCPU": 3, "MEMORY_MB": 64}
            async with busy_placement.seeder() as s:  # the first consumer's claim written again
                status, _ = await s.call(
                    "PUT",
                    f"/allocations/{consumers[0]}",
                    {
                        "allocations": {rp: {"resources": {"VCPU": 2}}},
                        "project_id": "p",
                        "user_id": "u",
                        "consumer_generation": 1,
                    },
                    version="1.28",
                )
                assert status == 204
            again = await ranks.read(rp)
            assert again is not None
            assert [c for c, _ in again.consumers] == [*consumers[1:], consumers[0]]
            assert await ranks.read(str(uuidlib.uuid4())) is None
        finally:
            await ranks.close()


async def test_database_usage_is_what_placements_api_says(busy_placement: PlacementServer) -> None:
    """Reserved, allocation ratios and several classes: the database read and the API agree,
    and a provider the database does not know is asked of the API (which then fails)."""
    reader = reader_for(busy_placement)
    async with PlacementClient(busy_placement.options) as client:
        source = DatabaseUsage(reader, client)
        try:
            async with busy_placement.seeder() as s:
                rp = await s.compute_node(
                    f"ratio-{uuidlib.uuid4().hex[:8]}",
                    vcpus=6,
                    memory_mb=3000,
                    cpu_allocation_ratio=2.5,
                )
                status, inv = await s.call("GET", f"/resource_providers/{rp}/inventories")
                assert status == 200
                inv["inventories"]["MEMORY_MB"]["reserved"] = 512
                inv["inventories"]["MEMORY_MB"]["allocation_ratio"] = 1.3
                status, _ = await s.call("PUT", f"/resource_providers/{rp}/inventories", inv)
                assert status == 200, inv
            ar = {"allocations": {rp: {"resources": {"VCPU": 4, "MEMORY_MB": 700}}}}
            assert await client.claim(str(uuidlib.uuid4()), ar, project_id="p", user_id="u")
            from_db = await source.provider_usage(rp)
            from_api = await client.provider_usage(rp)
            assert (
                from_db
                == from_api
                == ProviderUsage(
                    {
                        "VCPU": 15,
                        "MEMORY_MB": int((3000 - 512) * 1.3),
                        "DISK_GB": from_api.capacity["DISK_GB"],
                    },
                    {"VCPU": 4, "MEMORY_MB": 700},
                )
            )
            assert (source.reads, source.fallbacks) == (1, 0)
            with pytest.raises(PlacementError):
                await source.provider_usage(str(uuidlib.uuid4()))
            assert source.fallbacks == 1
        finally:
            await reader.close()


async def test_reads_asked_together_share_one_query(busy_placement: PlacementServer) -> None:
    """Claims that shared a POST are confirmed together: their usage reads are one query, and
    each reader gets what a read of its own provider alone gives."""
    reader = reader_for(busy_placement)
    try:
        async with busy_placement.seeder() as s:
            rps = [
                await s.compute_node(f"batch-{uuidlib.uuid4().hex[:8]}", vcpus=2 + i)
                for i in range(3)
            ]
            status, _ = await s.call(
                "PUT",
                f"/allocations/{uuidlib.uuid4()}",
                {
                    "allocations": {rps[1]: {"resources": CLAIM}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                },
                version="1.28",
            )
            assert status == 204
        unknown = str(uuidlib.uuid4())
        asked = [*rps, rps[1], unknown]
        together = await asyncio.gather(*(reader.read(u) for u in asked))
        assert reader.queries == 1
        alone = [await reader.read(u) for u in asked]
        assert reader.queries == 1 + len(asked)
        assert together == alone
        assert together[1][1] == CLAIM and together[0][1] == {}  # used: only where claimed
        async with busy_placement.seeder() as s:
            for rp, (capacity, _) in zip(rps, together, strict=False):
                status, inv = await s.call("GET", f"/resource_providers/{rp}/inventories")
                assert status == 200
                assert capacity == {
                    rc: int((v["total"] - v["reserved"]) * v["allocation_ratio"])
                    for rc, v in inv["inventories"].items()
                }
        assert together[-1] == ({}, {})  # a provider the database does not have
    finally:
        await reader.close()
