"""One big multi-create must not stall the event loop (issue #13).

A 5,000-instance select_destinations is about a second of CPU. Before pacing it ran without
one await, so heartbeats, the watchdog and every other call waited for all of it. These tests
measure the loop's longest gap with a ticker while such a request runs, and check that a small
call sent after the big one is answered first. The bound is relative to the request's own
duration, measured in the same run (a request that never yields stalls the loop for all of it),
so a loaded machine slows both sides alike; how fast it is belongs to bench/.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from asyncsched.objects.models import Flavor, RequestContext, RequestSpec
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState
from tests.support.loop_gap import max_gap_while
from tests.support.sched_fakes import FakeCache
from tests.support.sched_helpers import NOW, config, host

CTX = RequestContext(request_id="req-big", user_id="u", project_id="p")
BIG = 5000


class CountingPlacement:
    """Every host is a candidate; claims always succeed (O(1) each, unlike FakePlacement)."""

    def __init__(self, hosts: list[HostState]) -> None:
        self.hosts = hosts
        self.claims = 0
        self.rolled_back = 0

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        want = dict(request.merged_resources())
        return Candidates.parse(
            {
                "allocation_requests": [
                    {"allocations": {h.uuid: {"resources": want}}, "mappings": {"": [h.uuid]}}
                    for h in self.hosts
                ],
                "provider_summaries": {h.uuid: {"resources": {}, "traits": []} for h in self.hosts},
            }
        )

    async def claim(
        self, consumer_uuid: str, allocation_request: Mapping[str, Any], **kw: Any
    ) -> bool:
        self.claims += 1
        return True

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        self.rolled_back += len(list(consumer_uuids))


def roomy_cloud(n: int) -> list[HostState]:
    return [
        host(
            f"big{i}",
            vcpus_total=100_000,
            total_usable_ram_mb=10**8,
            free_ram_mb=10**8,
            free_disk_mb=10**10,
            total_usable_disk_gb=10**7,
        )
        for i in range(n)
    ]


def spec(num: int) -> RequestSpec:
    flavor = Flavor(memory_mb=512, vcpus=1, root_gb=1, name="m1.tiny")
    return RequestSpec(flavor=flavor, num_instances=num, project_id="p", user_id="u")


@pytest.mark.parametrize("with_uuids", [True, False], ids=["claims", "no-instance-uuids"])
async def test_a_5000_instance_request_keeps_the_loop_turning(with_uuids: bool) -> None:
    hosts = roomy_cloud(100)
    cache = FakeCache(hosts)
    placement = CountingPlacement(hosts)
    mgr = SchedulerManager(config(), cache, placement, clock=lambda: NOW)
    uuids = [str(uuid.uuid4()) for _ in range(BIG)] if with_uuids else None
    steps = await max_gap_while(mgr.select_destinations(CTX, spec(BIG), uuids, True, True))
    result, gap, ticks, took = steps.result, steps.longest, steps.ticks, steps.total
    assert len(result) == BIG
    assert placement.claims == (BIG if with_uuids else 0)
    # Unpaced, the longest step is the whole request (gap == took, one tick); both are CPU time.
    assert gap < took / 4, f"the loop stalled {gap:.3f} s during a {took:.2f} s request"
    # It yielded all along, not once or twice (the pacer's budget is 10 ms).
    assert ticks >= 4, f"{ticks} ticks in {took:.2f} s"
    if not with_uuids:  # nova: without instance uuids the consumption is request-local
        assert not cache.consumed


async def test_a_small_call_is_answered_while_a_big_one_runs() -> None:
    hosts = roomy_cloud(100)
    mgr = SchedulerManager(config(), FakeCache(hosts), CountingPlacement(hosts), clock=lambda: NOW)
    finished: list[str] = []

    async def call(name: str, num: int) -> None:
        uuids = [str(uuid.uuid4()) for _ in range(num)]
        await mgr.select_destinations(CTX, spec(num), uuids, True, True)
        finished.append(name)

    big = asyncio.create_task(call("big", BIG))
    await asyncio.sleep(0.05)  # the big one is deciding
    await call("small", 1)
    assert finished == ["small"]
    await big
    assert finished == ["small", "big"]
