"""The manager with issue 7's NUMATopologyFilter: limits reach the Selection, consume pins."""

from __future__ import annotations

import uuid

from asyncsched.objects.models import Flavor, NUMATopologyLimits, RequestContext, RequestSpec
from asyncsched.scheduling.manager import SchedulerManager
from tests.support.numa_data import dedicated_cell, guest
from tests.support.numa_data import host as numa_host
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host


async def test_numa_limits_and_consumption_flow_through_the_manager() -> None:
    topo = numa_host("two_socket_28c.json")
    hosts = [
        host(
            f"cmp{i}",
            numa_topology=topo,
            free_ram_mb=65536,
            total_usable_ram_mb=65536,
            vcpus_total=56,
        )
        for i in range(2)
    ]
    conf = config(filter_scheduler={"enabled_filters": ("ComputeFilter", "NUMATopologyFilter")})
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    mgr = SchedulerManager(conf, cache, placement, clock=lambda: NOW)
    spec = RequestSpec(
        flavor=Flavor(
            memory_mb=1024, vcpus=2, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"}
        ),
        numa_topology=guest(dedicated_cell([0, 1], 1024)),
        project_id="p",
        user_id="u",
        num_instances=2,
    )
    uuids = [str(uuid.uuid4()) for _ in range(2)]
    result = await mgr.select_destinations(RequestContext(), spec, uuids, True, True)
    for row in result:
        assert row[0].limits is not None
        assert isinstance(row[0].limits.numa_topology, NUMATopologyLimits)
    chosen = {r[0].compute_node_uuid for r in result}
    pinned = [
        sum(len(c.pinned_cpus) for c in h.numa_topology.cells)
        for h in hosts
        if h.numa_topology is not None
        if h.uuid in chosen
    ]
    assert sum(pinned) == 4  # two instances x two dedicated CPUs recorded on the hosts
