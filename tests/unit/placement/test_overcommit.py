"""The overcommit guard over a small in-memory provider table (the race itself is shown
against the real Placement in tests/integration/placement/test_overcommit_real.py)."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from asyncsched.exceptions import AllocationDeleteFailed, PlacementError
from asyncsched.placement.overcommit import OvercommitGuard
from asyncsched.placement.usage import Holdings, ProviderUsage, capacities
from tests.support.virtual_clock import run_virtual


def test_capacity_is_placements_rule() -> None:
    cap = capacities(
        {
            "VCPU": {"total": 10, "reserved": 2, "allocation_ratio": 1.5},
            "MEMORY_MB": {"total": 1000, "reserved": 0, "allocation_ratio": 1.0},
        }
    )
    u = ProviderUsage.parse(cap, {"VCPU": 12, "MEMORY_MB": 1001, "DISK_GB": 0})
    assert u.capacity == {"VCPU": 12, "MEMORY_MB": 1000}
    assert u.over() == {"MEMORY_MB": 1}
    # a class in use without inventory is over by all of it
    assert ProviderUsage({}, {"PCPU": 2}).over() == {"PCPU": 2}


class Table:
    """Providers' inventories and the allocations of consumers; Placement's arithmetic."""

    def __init__(self, capacity: dict[str, dict[str, int]], remove_latency: float = 0.0) -> None:
        self.capacity = capacity
        self.allocs: dict[str, dict[str, dict[str, int]]] = {}
        self.remove_latency = remove_latency
        self.broken: set[str] = set()
        self.removed: list[str] = []

    def put(self, consumer: str, allocs: dict[str, dict[str, int]]) -> dict[str, Any]:
        """Accept unconditionally (the race) and return the allocation request."""
        self.allocs[consumer] = allocs
        return {"allocations": {rp: {"resources": r} for rp, r in allocs.items()}}

    async def provider_usage(self, provider_uuid: str) -> ProviderUsage:
        if provider_uuid in self.broken:
            raise PlacementError("usages: HTTP 503")
        used: dict[str, int] = {}
        for a in self.allocs.values():
            for rc, n in a.get(provider_uuid, {}).items():
                used[rc] = used.get(rc, 0) + n
        return ProviderUsage(self.capacity[provider_uuid], used)

    async def remove(self, consumer: str) -> None:
        await asyncio.sleep(self.remove_latency)
        self.allocs.pop(consumer, None)
        self.removed.append(consumer)


def _over_now(t: Table, rp: str) -> bool:
    used: dict[str, int] = {}
    for a in t.allocs.values():
        for rc, n in a.get(rp, {}).items():
            used[rc] = used.get(rc, 0) + n
    return bool(ProviderUsage(t.capacity[rp], used).over())


def guard(t: Table, seed: int = 0, backoff: float = 0.01) -> OvercommitGuard:
    return OvercommitGuard(t, t.remove, backoff=backoff, rng=random.Random(seed))


async def test_a_claim_within_capacity_is_kept_at_once() -> None:
    t = Table({"rp": {"VCPU": 2}})
    g = guard(t)
    assert await g.confirm("a", t.put("a", {"rp": {"VCPU": 2}}))
    assert t.removed == [] and g.health()["confirmed"] == 1 and g.health()["raced"] == 0


async def test_a_claim_still_over_after_the_backoff_is_backed_out() -> None:
    t = Table({"rp": {"VCPU": 2}})
    t.put("old", {"rp": {"VCPU": 2}})
    g = guard(t)
    assert not await g.confirm("new", t.put("new", {"rp": {"VCPU": 1}}))
    assert t.removed == ["new"] and not _over_now(t, "rp")
    assert g.health()["backed_out"] == 1


async def test_a_claim_is_kept_when_the_other_racer_backed_out_first() -> None:
    t = Table({"rp": {"VCPU": 1}})
    t.put("other", {"rp": {"VCPU": 1}})
    mine = t.put("mine", {"rp": {"VCPU": 1}})
    g = guard(t, backoff=0.05)
    task = asyncio.create_task(g.confirm("mine", mine))
    await asyncio.sleep(0)  # mine saw the race and is backing off
    await t.remove("other")  # the other scheduler backed out
    assert await task
    assert "mine" in t.allocs and g.health()["kept_after_race"] == 1


async def test_over_capacity_in_a_class_the_claim_does_not_use_is_only_counted() -> None:
    t = Table({"rp": {"VCPU": 4, "DISK_GB": 10}})
    t.put("old", {"rp": {"DISK_GB": 11}})  # e.g. the inventory was shrunk under it
    g = guard(t)
    assert await g.confirm("new", t.put("new", {"rp": {"VCPU": 1}}))
    assert t.removed == [] and g.health()["foreign_over"] == 1


async def test_unreadable_usage_keeps_the_claim_placement_accepted() -> None:
    t = Table({"rp": {"VCPU": 1}, "shared": {"DISK_GB": 10}})
    t.broken.add("shared")
    g = guard(t)
    claim = t.put("new", {"rp": {"VCPU": 1}, "shared": {"DISK_GB": 5}})
    assert await g.confirm("new", claim)
    assert g.health()["unchecked"] == 1


async def test_a_failed_back_out_still_reports_the_claim_failed() -> None:
    t = Table({"rp": {"VCPU": 1}})
    t.put("old", {"rp": {"VCPU": 1}})

    async def remove(consumer: str) -> None:
        raise AllocationDeleteFailed(consumer_uuid=consumer, error="Placement down")

    g = OvercommitGuard(t, remove, backoff=0.0)
    assert not await g.confirm("new", t.put("new", {"rp": {"VCPU": 1}}))


@pytest.mark.parametrize("racers", [2, 3, 5])
def test_racing_claims_never_stay_over_and_mostly_one_wins(racers: int) -> None:
    """``racers`` schedulers claim the last slot at once, 30 times: never over capacity
    afterwards. Backing out is random, so the slot is usually kept by one of them; it is
    lost when the last two look again within one removal of each other. On a virtual clock
    (tests/support/virtual_clock.py): on the real one a busy machine fires the racers' timers
    in the same loop turn and decides the race instead of the backoffs."""

    async def rounds() -> int:
        kept_rounds = 0
        for round_ in range(30):
            t = Table({"rp": {"VCPU": 1}}, remove_latency=0.002)
            claims = [t.put(f"c{i}", {"rp": {"VCPU": 1}}) for i in range(racers)]
            guards = [guard(t, seed=round_ * 10 + i, backoff=0.05) for i in range(racers)]
            kept = await asyncio.gather(
                *(
                    g.confirm(f"c{i}", c)
                    for i, (g, c) in enumerate(zip(guards, claims, strict=True))
                )
            )
            assert not _over_now(t, "rp")
            assert sum(kept) == len(t.allocs) <= 1  # what the callers believe is what is held
            kept_rounds += sum(kept)
        return kept_rounds

    kept_rounds = run_virtual(rounds())
    assert kept_rounds >= 15, f"the slot was lost in {30 - kept_rounds} of 30 rounds"


class RankedTable(Table):
    """The same table read as Placement's database reads it: holdings in write order."""

    async def provider_holdings(self, provider_uuid: str) -> Holdings | None:
        usage = await self.provider_usage(provider_uuid)
        held = tuple((c, a[provider_uuid]) for c, a in self.allocs.items() if provider_uuid in a)
        return Holdings(usage, held)  # dicts keep insertion order: the write order


def test_the_newest_claims_beyond_capacity_are_named() -> None:
    h = Holdings(
        ProviderUsage({"VCPU": 4, "MEMORY_MB": 100}, {"VCPU": 6, "MEMORY_MB": 90}),
        (
            ("old", {"VCPU": 2, "MEMORY_MB": 30}),
            ("a", {"VCPU": 2, "MEMORY_MB": 30}),
            ("b", {"VCPU": 1, "MEMORY_MB": 30}),
            ("c", {"VCPU": 1}),
        ),
    )
    assert h.newest_beyond(["VCPU"]) == {"b", "c"}  # 2 over: c then b
    assert h.newest_beyond(["MEMORY_MB"]) == set()  # not over
    assert h.newest_beyond([]) == set()


@pytest.mark.parametrize("racers", [2, 3, 5])
async def test_ranked_racers_for_one_slot_end_with_exactly_one_placed(racers: int) -> None:
    """With the write order, racers that look at the same instant (what loses the slot on the
    unranked path, see the next test) still keep exactly one claim: the oldest."""
    for round_ in range(30):
        t = RankedTable({"rp": {"VCPU": 1}}, remove_latency=0.002)
        claims = [t.put(f"c{i}", {"rp": {"VCPU": 1}}) for i in range(racers)]
        guards = [guard(t, seed=round_ * 10 + i, backoff=0.02) for i in range(racers)]
        kept = await asyncio.gather(
            *(g.confirm(f"c{i}", c) for i, (g, c) in enumerate(zip(guards, claims, strict=True)))
        )
        assert not _over_now(t, "rp")
        assert kept == [True] + [False] * (racers - 1), round_
        assert list(t.allocs) == ["c0"]


async def test_unranked_racers_looking_again_together_lose_the_slot() -> None:
    """The mechanism the ranks remove: two racers whose second looks fall within one removal
    of each other both see the provider over and both back out."""
    t = Table({"rp": {"VCPU": 1}}, remove_latency=0.002)
    claims = [t.put(f"c{i}", {"rp": {"VCPU": 1}}) for i in range(2)]
    guards = [guard(t, backoff=0.0) for _ in range(2)]
    kept = await asyncio.gather(
        *(g.confirm(f"c{i}", c) for i, (g, c) in enumerate(zip(guards, claims, strict=True)))
    )
    assert kept == [False, False] and t.allocs == {}


async def test_an_older_ranked_claim_backs_out_when_the_newer_one_stays() -> None:
    """A newer claim from a scheduler without the guard never backs out: ours, older, waits,
    finds the provider still over and goes, so the provider never stays over."""
    t = RankedTable({"rp": {"VCPU": 1}})
    mine = t.put("mine", {"rp": {"VCPU": 1}})
    t.put("foreign", {"rp": {"VCPU": 1}})
    g = guard(t, backoff=0.01)
    assert not await g.confirm("mine", mine)
    assert list(t.allocs) == ["foreign"] and g.health()["backed_out"] == 1


async def test_an_unreadable_rank_falls_back_to_the_random_pause() -> None:
    t = RankedTable({"rp": {"VCPU": 1}})

    async def broken(provider_uuid: str) -> Holdings | None:
        raise PlacementError("database gone")

    t.provider_holdings = broken  # type: ignore[method-assign]
    t.put("other", {"rp": {"VCPU": 1}})
    mine = t.put("mine", {"rp": {"VCPU": 1}})
    g = guard(t, backoff=0.05)
    task = asyncio.create_task(g.confirm("mine", mine))
    await asyncio.sleep(0.001)
    await t.remove("other")
    assert await task and g.health()["kept_after_race"] == 1
