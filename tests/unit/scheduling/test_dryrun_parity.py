"""On random clouds, the dry runs tell what the real scheduler then does.

Twin clouds from one seed: explain's dry run on one, the real ``select_destinations`` on the
other, must choose the same hosts and alternates and leave the first cloud as it was; capacity's
count N is exactly what a real multi-create achieves (N succeeds, N + 1 is NoValidHost).
Consumption-sensitive filters are on (IoOpsFilter, NumInstancesFilter), so the count depends
on the consumption the dry runs apply to their copies.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import pytest

from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Flavor, RequestContext, RequestSpec
from asyncsched.scheduling.capacity import capacity
from asyncsched.scheduling.dryrun import dry_run
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState
from bench.synthetic_cloud import NOW, make_cloud
from tests.support.numa_data import dedicated_cell, guest
from tests.support.numa_data import host as numa_host
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import config, host

CTX = RequestContext(request_id="req-parity", user_id="u", project_id="p")
FILTERS = ["ComputeFilter", "IoOpsFilter", "NumInstancesFilter", "ImagePropertiesFilter"]
CONF = config(
    filter_scheduler={
        "enabled_filters": FILTERS,
        "max_io_ops_per_host": 12,
        "max_instances_per_host": 62,
    }
)
BIG = Flavor(memory_mb=32768, vcpus=8, root_gb=200, name="x1.big")


def twins(seed: int, n: int = 60) -> tuple[list[HostState], list[HostState], list[Any]]:
    a, aggs = make_cloud(n, random.Random(seed))
    b, _ = make_cloud(n, random.Random(seed))
    return a, b, aggs


def state_of(hosts: list[HostState]) -> list[tuple[Any, ...]]:
    return [
        (h.generation, h.free_ram_mb, h.vcpus_used, h.num_io_ops, h.num_instances,
         dict(h.assumed), set(h.instances))
        for h in hosts
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("num", [1, 4])
async def test_dry_run_chooses_what_the_real_call_then_chooses(seed: int, num: int) -> None:
    a, b, aggs = twins(seed)
    spec = RequestSpec(flavor=BIG, num_instances=num, project_id="p", user_id="u")
    before = state_of(a)
    dry = await dry_run(CONF, FakeCache(a, aggs), FakePlacement(a), spec, clock=lambda: NOW)
    assert state_of(a) == before
    mgr = SchedulerManager(CONF, FakeCache(b, aggs), FakePlacement(b), clock=lambda: NOW)
    uuids = [str(uuid.uuid4()) for _ in range(num)]
    real = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert dry.error is None
    assert [[s.compute_node_uuid for s in alts] for alts in dry.selections] == [
        [s.compute_node_uuid for s in alts] for alts in real
    ]


@pytest.mark.parametrize("seed", range(4))
async def test_capacity_is_what_a_real_multi_create_achieves(seed: int) -> None:
    a, _, aggs = twins(seed, 40)
    cache, placement = FakeCache(a, aggs), FakePlacement(a)
    spec = RequestSpec(flavor=BIG, project_id="p", user_id="u")
    before = state_of(a)
    cap = await capacity(CONF, cache, placement, spec, clock=lambda: NOW)
    assert state_of(a) == before and placement.allocations == {}
    assert cap.total > 0 and cap.limited_by
    mgr = SchedulerManager(CONF, cache, placement, clock=lambda: NOW)

    async def boot(n: int) -> list[Any]:
        many = RequestSpec(flavor=BIG, num_instances=n, project_id="p", user_id="u")
        return await mgr.select_destinations(
            CTX, many, [str(uuid.uuid4()) for _ in range(n)], True, False
        )

    with pytest.raises(NoValidHost):
        await boot(cap.total + 1)
    assert placement.allocations == {}
    assert len(await boot(cap.total)) == cap.total


async def test_numa_pinning_lands_on_the_copies_and_counts_in_capacity() -> None:
    """A pinned request: the dry run pins CPUs on its copies (instance 2 sees instance 1's
    pins), the live topology keeps none, and capacity stops hosts on the NUMA filter."""
    topo = numa_host("two_socket_28c.json")

    def cloud() -> list[HostState]:
        return [
            host(
                f"cmp{i}",
                uuid=f"00000000-0000-0000-0000-00000000000{i}",
                numa_topology=topo,
                free_ram_mb=10**6,
                total_usable_ram_mb=10**6,
                vcpus_total=112,
                total_usable_disk_gb=10**5,
            )
            for i in range(2)
        ]

    hosts = cloud()
    conf = config(filter_scheduler={"enabled_filters": ("ComputeFilter", "NUMATopologyFilter")})
    spec = RequestSpec(
        flavor=Flavor(
            memory_mb=1024, vcpus=8, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"}
        ),
        numa_topology=guest(dedicated_cell(list(range(8)), 1024)),
        project_id="p",
        user_id="u",
        num_instances=2,
    )
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    dry = await dry_run(conf, cache, placement, spec, clock=lambda: NOW)
    assert dry.error is None and dry.hosts is not None
    pinned = sum(
        len(c.pinned_cpus)
        for s in dry.hosts.states
        if s.numa_topology is not None
        for c in s.numa_topology.cells
    )
    assert pinned == 16
    assert all(h.numa_topology is topo for h in hosts)  # live hosts untouched
    cap = await capacity(conf, cache, placement, spec, clock=lambda: NOW)
    assert cap.limited_by and all(k.startswith("NUMATopologyFilter") for k in cap.limited_by)
    assert cap.total == sum(cap.per_host.values()) and all(h.numa_topology is topo for h in hosts)
    for n, fits in ((cap.total + 1, False), (cap.total, True)):  # the real pins agree
        fresh = cloud()  # (the fake cache's release does not unpin: a cloud per attempt)
        mgr = SchedulerManager(conf, FakeCache(fresh), FakePlacement(fresh), clock=lambda: NOW)
        many = dataclasses.replace(spec, num_instances=n)
        uuids = [str(uuid.uuid4()) for _ in range(n)]
        if fits:
            assert len(await mgr.select_destinations(CTX, many, uuids, True, False)) == n
        else:
            with pytest.raises(NoValidHost):
                await mgr.select_destinations(CTX, many, uuids, True, False)
