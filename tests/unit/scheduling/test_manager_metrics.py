"""What SchedulerManager reports to its Recorder: phases, instances, NoValidHost causes,
replaced claims and rollbacks (over the fakes of test_manager)."""

from __future__ import annotations

import dataclasses

import pytest

from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Flavor, InstanceGroup
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState, ServiceInfo
from tests.support.recorder import RecordingRecorder
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import CTX, NOW, boot, cloud, config


def manager(hosts: list[HostState]) -> tuple[SchedulerManager, FakePlacement, RecordingRecorder]:
    rec = RecordingRecorder()
    placement = FakePlacement(hosts)
    mgr = SchedulerManager(
        config(), FakeCache(hosts, []), placement, clock=lambda: NOW, recorder=rec
    )
    return mgr, placement, rec


async def test_a_multi_create_reports_its_phases_and_instances() -> None:
    mgr, _, rec = manager(cloud(4))
    spec, uuids = boot(3)
    await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert [p for p, _ in rec.named("phase")] == ["candidates", "services", "decide", "claim"]
    assert all(seconds >= 0 for _, seconds in rec.named("phase"))
    assert rec.named("scheduled") == [(3,)]
    assert rec.named("no_valid_host") == [] and rec.named("rollback") == []


async def test_a_refused_claim_is_counted_as_replaced() -> None:
    hosts = cloud(3)
    mgr, placement, rec = manager(hosts)
    placement.refuse.add(hosts[0].uuid)
    spec, uuids = boot()
    await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert rec.named("claim_replaced") == [()]
    assert rec.named("scheduled") == [(1,)]


async def test_the_filter_that_emptied_the_list_is_the_cause_and_claims_are_rolled_back() -> None:
    mgr, placement, rec = manager(cloud(2))
    spec, uuids = boot(3)
    group = InstanceGroup(
        uuid="g", policy="anti-affinity", policies=("anti-affinity",), members=tuple(uuids)
    )
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(
            CTX, dataclasses.replace(spec, instance_group=group), uuids, True, True
        )
    assert rec.named("no_valid_host") == [("ServerGroupAntiAffinityFilter",)]
    assert rec.named("rollback") == [(2,)]  # the two instances that had been claimed
    assert placement.allocations == {} and rec.named("scheduled") == []


async def test_compute_filter_emptying_the_list() -> None:
    hosts = cloud(2)
    for i, h in enumerate(hosts):
        h.service = ServiceInfo(id=i, host=h.host, disabled=True, last_seen_up=NOW)
    mgr, _, rec = manager(hosts)
    spec, uuids = boot()
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert rec.named("no_valid_host") == [("ComputeFilter",)]
    assert rec.named("rollback") == []  # nothing had been claimed


async def test_causes_before_any_host_was_considered() -> None:
    mgr, placement, rec = manager(cloud(2))
    spec, uuids = boot(flavor=Flavor(memory_mb=10**6, vcpus=1, root_gb=1))
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    placement.broken = True
    spec, uuids = boot()
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    placement.broken = False
    spec, uuids = boot(force_hosts=("nope",))  # refused while building the query
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert rec.named("no_valid_host") == [
        ("placement_no_candidates",),
        ("placement_error",),
        ("request",),
    ]


async def test_every_claim_refused_is_counted_as_claims() -> None:
    hosts = cloud(2)
    mgr, placement, rec = manager(hosts)
    placement.refuse.update(h.uuid for h in hosts)
    spec, uuids = boot()
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert rec.named("no_valid_host") == [("claims",)]
    assert len(rec.named("claim_replaced")) == 2


async def test_the_chance_driver_counts_instances_and_no_valid_host() -> None:
    hosts = cloud(3)
    rec = RecordingRecorder()
    mgr = ChanceScheduler(
        config(asyncsched={"driver": "chance"}),
        FakeCache(hosts, []),
        FakePlacement(hosts),
        clock=lambda: NOW,
        recorder=rec,
    )
    spec, uuids = boot(2)
    await mgr.select_destinations(CTX, spec, uuids, True, True)
    spec, uuids = boot(ignore_hosts=tuple(h.host for h in hosts))
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert rec.named("scheduled") == [(2,)]
    assert rec.named("no_valid_host") == [("chance_driver",)]
