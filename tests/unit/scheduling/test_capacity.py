"""Capacity: the scheduler's filters and consumption on scratch copies until nothing fits."""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from typing import Any

import pytest

from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import (
    Flavor,
    InstanceGroup,
    RequestContext,
    RequestSpec,
)
from asyncsched.scheduling.capacity import YIELD_EVERY, Bounds, Capacity, capacity
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState, ServiceInfo
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, agg, config, host

CTX = RequestContext(request_id="req-1", user_id="u", project_id="p")
FLAVOR = Flavor(memory_mb=1024, vcpus=1, root_gb=10, name="m1.small")


def cloud(n: int = 6) -> list[HostState]:
    # Placement inventory (FakePlacement): VCPU 8 x 4.0 = 32, MEMORY_MB 8192, DISK_GB 100
    return [host(f"cmp{i}", cell_uuid=f"cell{i % 2}") for i in range(n)]


def boot(**kw: Any) -> RequestSpec:
    return RequestSpec(flavor=kw.pop("flavor", FLAVOR), project_id="p", user_id="u", **kw)


async def count(
    hosts: list[HostState], spec: RequestSpec, conf: Any = None, aggs: Any = ()
) -> tuple[Capacity, FakeCache, FakePlacement]:
    cache, placement = FakeCache(hosts, list(aggs)), FakePlacement(hosts)
    out = await capacity(conf or config(), cache, placement, spec, clock=lambda: NOW)
    return out, cache, placement


async def multi_create(mgr: SchedulerManager, n: int) -> list[list[Any]]:
    uuids = [str(uuid.uuid4()) for _ in range(n)]
    return await mgr.select_destinations(CTX, boot(num_instances=n), uuids, True, False)


async def test_count_is_what_a_real_multi_create_achieves_one_more_fails() -> None:
    hosts = cloud()
    hosts[5].service = ServiceInfo(id=9, host="cmp5", disabled=True, last_seen_up=NOW)
    before = [(h.generation, h.free_ram_mb, h.num_instances, dict(h.assumed)) for h in hosts]
    out, cache, placement = await count(hosts, boot())
    assert out.total == 5 * 8  # RAM: 8192 / 1024 per host, the disabled one takes none
    assert out.limited_by == {"Placement: MEMORY_MB": 5}
    assert out.runs_out_first == "Placement: MEMORY_MB"
    assert out.excluded == {"ComputeFilter: disabled": 1}
    assert out.per_cell == {"cell0": 24, "cell1": 16} and out.per_az == {"nova": 40}
    assert out.hosts_used == 5 and out.hosts_known == 6
    assert [
        (h.generation, h.free_ram_mb, h.num_instances, dict(h.assumed)) for h in hosts
    ] == before
    assert placement.claims == [] and placement.allocations == {}
    mgr = SchedulerManager(config(), cache, placement, clock=lambda: NOW)
    with pytest.raises(NoValidHost):
        await multi_create(mgr, out.total + 1)
    assert placement.allocations == {}  # rolled back
    placed = await multi_create(mgr, out.total)
    assert len(placed) == out.total
    again = await capacity(config(), cache, placement, boot(), clock=lambda: NOW)
    assert again.total == 0
    assert again.excluded == {"Placement: not-a-candidate": 5, "ComputeFilter: disabled": 1}


async def test_a_filter_that_runs_out_is_named_and_aggregates_are_counted() -> None:
    hosts = cloud(4)
    conf = config(
        filter_scheduler={
            "enabled_filters": ["ComputeFilter", "NumInstancesFilter"],
            "max_instances_per_host": 3,
        }
    )
    hosts[0].num_instances = 2
    aggs = [agg(("cmp0", "cmp1"), availability_zone="east")]
    for h in hosts[:2]:
        h.aggregates = tuple(aggs)
    out, _, _ = await count(hosts, boot(), conf, aggs)
    assert out.total == 1 + 3 + 3 + 3
    assert out.limited_by == {"NumInstancesFilter: num-instances": 4}
    assert out.per_az == {"nova": 6, "east": 4} and out.per_aggregate == {"a": 4}
    assert out.per_host["cmp0/cmp0"] == 1


async def test_server_groups_anti_affinity_one_per_host_affinity_one_host() -> None:
    group = InstanceGroup(uuid=str(uuid.uuid4()), policy="anti-affinity")
    out, _, _ = await count(cloud(5), boot(instance_group=group))
    assert out.total == 5 and set(out.per_host.values()) == {1}
    assert out.limited_by == {"ServerGroupAntiAffinityFilter: anti-affinity": 5}
    group = InstanceGroup(uuid=str(uuid.uuid4()), policy="affinity")
    out, _, _ = await count(cloud(5), boot(instance_group=group))
    assert out.total == 8 and out.hosts_used == 1 and out.note


async def test_nothing_fits_anywhere() -> None:
    big = Flavor(memory_mb=10**6, vcpus=1)
    out, _, _ = await count(cloud(3), boot(flavor=big))
    assert out.total == 0 and out.per_host == {}
    assert out.excluded == {"Placement: no allocation candidates": 3}


async def test_a_long_run_yields_to_the_event_loop() -> None:
    hosts = [host(f"cmp{i}", total_usable_ram_mb=65536) for i in range(200)]
    ticks = 0
    done = False

    async def ticker() -> None:
        nonlocal ticks
        while not done:
            ticks += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    out, _, _ = await count(hosts, boot())
    done = True
    await task
    assert out.total == 200 * 10  # DISK_GB: 100 / 10 per host
    assert ticks >= out.total // YIELD_EVERY


async def test_a_failing_placement_is_named_not_taken_for_no_room() -> None:
    hosts = cloud(2)
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    placement.broken = True
    out = await capacity(config(), cache, placement, boot(), clock=lambda: NOW)
    assert out.total == 0
    assert out.excluded == {"Placement failed: placement is down": 2}


TINY = Flavor(memory_mb=1, vcpus=0, root_gb=0, name="tiny")  # the vcpus=0&ram=1&disk=0


async def test_a_run_stops_at_max_instances_and_says_it_is_bounded() -> None:
    hosts = cloud(4)
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    bounds = Bounds(max_instances=1000, deadline=math.inf)
    out = await capacity(
        config(), cache, placement, boot(flavor=TINY), clock=lambda: NOW, bounds=bounds
    )
    assert out.total == 1000  # 4 x 8192 would fit: the bound stopped it
    assert out.bounded is not None and "capacity_max_instances" in out.bounded
    assert out.as_dict()["bounded"] == out.bounded
    whole = await capacity(config(), cache, placement, boot(), clock=lambda: NOW, bounds=bounds)
    assert whole.bounded is None and whole.total == 4 * 8  # a run within the bound: exact


async def test_a_run_past_its_deadline_stops_and_says_so() -> None:
    hosts = cloud(4)
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    bounds = Bounds(max_instances=10**9, deadline=time.monotonic())  # already due
    out = await capacity(
        config(), cache, placement, boot(flavor=TINY), clock=lambda: NOW, bounds=bounds
    )
    assert out.bounded is not None and "deadline" in out.bounded
    assert out.total < 4 * 8192


async def test_a_cancelled_run_stops_at_its_next_yield() -> None:
    hosts = cloud(4)
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    run = asyncio.create_task(
        capacity(config(), cache, placement, boot(flavor=TINY), clock=lambda: NOW)
    )
    for _ in range(3):
        await asyncio.sleep(0)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert placement.claims == []
