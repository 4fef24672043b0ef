"""select_destinations end to end over fakes of the cache and Placement (reference §1)."""

from __future__ import annotations

import dataclasses
import json
import logging
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from asyncsched.exceptions import AllocationUpdateFailed, ConfigError, NoValidHost
from asyncsched.objects.models import (
    CellMapping,
    Destination,
    Flavor,
    InstanceGroup,
    RequestSpec,
)
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState, ServiceInfo
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import CTX, NOW, agg, boot, cloud, config, host


def manager(
    hosts: list[HostState], conf: Any = None, aggs: Sequence[Any] = ()
) -> tuple[SchedulerManager, FakeCache, FakePlacement]:
    cache = FakeCache(hosts, list(aggs))
    placement = FakePlacement(hosts)
    mgr = SchedulerManager(conf or config(), cache, placement, clock=lambda: NOW)
    return mgr, cache, placement


async def test_single_instance_selection_fields() -> None:
    hosts = cloud(3)
    az = agg(("cmp0",), availability_zone="az-east")
    hosts[0].aggregates = (az,)
    mgr, _cache, placement = manager(hosts, aggs=[az])
    spec, uuids = boot()
    [[sel, *alts]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert (sel.service_host, sel.nodename, sel.cell_uuid) == ("cmp0", "cmp0", "cell0")
    assert sel.compute_node_uuid == hosts[0].uuid
    assert sel.availability_zone == "az-east"
    assert sel.allocation_request_version == "1.36"
    alloc = json.loads(sel.allocation_request or "")
    assert alloc["allocations"] == {
        hosts[0].uuid: {"resources": {"DISK_GB": 10, "MEMORY_MB": 1024, "VCPU": 1}}
    }
    assert placement.allocations[uuids[0]]["allocations"] == alloc["allocations"]
    assert [a.service_host for a in alts] == ["cmp1", "cmp2"]  # max_attempts-1, weighed order
    assert all(a.availability_zone == "nova" for a in alts)
    assert all(a.compute_node_uuid not in placement.allocations for a in alts)
    assert sel.limits is not None and sel.limits.numa_topology is None


async def test_multi_create_claims_each_and_alternates_exclude_selected() -> None:
    hosts = cloud(16, cells=2)
    mgr, cache, placement = manager(hosts)
    spec, uuids = boot(10)
    result = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert len(result) == 10
    assert set(placement.allocations) == set(uuids)
    selected = {r[0].compute_node_uuid for r in result}
    for row, u in zip(result, uuids, strict=True):
        first, alts = row[0], row[1:]
        rp = next(iter(placement.allocations[u]["allocations"]))
        assert first.compute_node_uuid == rp
        assert len(alts) == 2
        for a in alts:
            assert a.cell_uuid == first.cell_uuid
            assert a.compute_node_uuid not in selected
    # consumption of instance k was visible to instance k+1: RAM spreads over hosts
    assert len(selected) == 10
    assert set(cache.consumed) == set(uuids)


async def test_without_alternates_and_without_objects() -> None:
    mgr, _, _ = manager(cloud(4))
    spec, uuids = boot(2)
    assert all(len(r) == 1 for r in await mgr.select_destinations(CTX, spec, uuids, True, False))
    spec, uuids = boot(2)
    assert all(len(r) == 1 for r in await mgr.select_destinations(CTX, spec, uuids, False, True))


async def test_anti_affinity_multi_create_uses_distinct_hosts() -> None:
    mgr, _, placement = manager(cloud(4))
    spec, uuids = boot(3)
    group = InstanceGroup(
        uuid="g", policy="anti-affinity", policies=("anti-affinity",), members=tuple(uuids)
    )
    spec = dataclasses.replace(spec, instance_group=group)
    result = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert len({r[0].service_host for r in result}) == 3
    assert len(placement.allocations) == 3


async def test_anti_affinity_impossible_rolls_back_every_claim() -> None:
    hosts = cloud(2)
    mgr, cache, placement = manager(hosts)
    spec, uuids = boot(3)
    group = InstanceGroup(
        uuid="g", policy="anti-affinity", policies=("anti-affinity",), members=tuple(uuids)
    )
    spec = dataclasses.replace(spec, instance_group=group)
    ram_before = [h.free_ram_mb for h in hosts]
    with pytest.raises(NoValidHost) as err:
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert err.value.reason == "There are not enough hosts available."
    assert placement.allocations == {}
    assert cache.consumed == {}
    assert [h.free_ram_mb for h in hosts] == ram_before


async def test_affinity_stacks_on_one_host() -> None:
    mgr, _, _ = manager(cloud(4))
    spec, uuids = boot(3)
    group = InstanceGroup(uuid="g", policy="affinity", policies=("affinity",), members=tuple(uuids))
    spec = dataclasses.replace(spec, instance_group=group)
    result = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert {r[0].service_host for r in result} == {"cmp0"}


async def test_failed_claim_walks_to_the_next_host_and_releases_consumption() -> None:
    hosts = cloud(3)
    mgr, cache, placement = manager(hosts)
    placement.refuse.add(hosts[0].uuid)
    spec, uuids = boot()
    [[sel, *_]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert sel.service_host == "cmp1"
    assert hosts[0].free_ram_mb == 8192 and uuids[0] not in hosts[0].instances
    assert cache.consumed[uuids[0]][0] == hosts[1].uuid
    assert placement.claims == [(uuids[0], hosts[0].uuid), (uuids[0], hosts[1].uuid)]


async def test_every_claim_failing_is_no_valid_host_with_nothing_left() -> None:
    hosts = cloud(2)
    mgr, cache, placement = manager(hosts)
    placement.refuse.update(h.uuid for h in hosts)
    spec, uuids = boot(2)
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert placement.allocations == {} and cache.consumed == {}


async def test_consumer_generation_conflict_propagates_after_rollback() -> None:
    hosts = cloud(3)
    mgr, cache, placement = manager(hosts)
    real = placement.claim

    async def claim(consumer_uuid: str, alloc: Any, **kw: Any) -> bool:
        if consumer_uuid == uuids[1]:
            raise AllocationUpdateFailed(
                consumer_uuid=consumer_uuid, error="consumer generation conflict"
            )
        return await real(consumer_uuid, alloc, **kw)

    placement.claim = claim  # type: ignore[method-assign,assignment]
    spec, uuids = boot(2)
    with pytest.raises(AllocationUpdateFailed):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert placement.allocations == {} and cache.consumed == {}


SMALL = {"VCPU": 1, "MEMORY_MB": 1024, "DISK_GB": 10}


def held_on(rp: str, resources: dict[str, int] = SMALL) -> dict[str, Any]:
    """What a dead scheduler's first claim for a redelivered call left in Placement."""
    return {"allocations": {rp: {"resources": dict(resources)}}}


async def test_redelivered_call_adopts_the_allocation_a_dead_process_left() -> None:
    hosts = cloud(3)  # the weigher would pick cmp0; the dead process claimed cmp2
    mgr, cache, placement = manager(hosts)
    spec, uuids = boot(2)
    placement.allocations[uuids[1]] = held_on(hosts[2].uuid)
    out = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert out[1][0].service_host == "cmp2"
    assert json.loads(out[1][0].allocation_request or "null") == held_on(hosts[2].uuid)
    assert out[0][0].service_host == "cmp0"
    assert placement.allocations[uuids[1]] == held_on(hosts[2].uuid)  # answered, not leaked
    assert set(placement.allocations) == set(uuids)
    assert cache.consumed[uuids[1]][0] == hosts[2].uuid  # consumed where it is allocated
    assert {u for u, (h, _) in cache.consumed.items() if h == hosts[1].uuid} == set()
    assert hosts[1].num_instances == 0 and hosts[2].num_instances == 1


async def test_an_adopted_allocation_is_rolled_back_with_the_call() -> None:
    """Issue #21 item 7: the adopted allocation is taken over and, when a later instance of
    the call fails, rolled back with the rest (it leaked before)."""
    hosts = cloud(4)
    mgr, cache, placement = manager(hosts)
    spec, uuids = boot(3)
    placement.allocations[uuids[1]] = held_on(hosts[3].uuid)
    real = placement.claim

    async def claim(consumer_uuid: str, alloc: Any, **kw: Any) -> bool:
        return False if consumer_uuid == uuids[2] else await real(consumer_uuid, alloc, **kw)

    placement.claim = claim  # type: ignore[method-assign,assignment]
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert placement.taken_over == [uuids[1]]
    assert placement.allocations == {} and cache.consumed == {}


async def test_redelivered_call_adopts_a_host_outside_the_candidates() -> None:
    hosts = cloud(2)
    extra = host("cmp9", cell_uuid="cell0", free_ram_mb=512, total_usable_ram_mb=8192)
    cache = FakeCache([*hosts, extra])
    placement = FakePlacement(hosts)
    mgr = SchedulerManager(config(), cache, placement, clock=lambda: NOW)
    spec, uuids = boot(1)
    placement.allocations[uuids[0]] = held_on(extra.uuid)
    out = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert [s.service_host for s in out[0]] == ["cmp9", "cmp0", "cmp1"]  # alternates still
    assert cache.consumed[uuids[0]][0] == extra.uuid and hosts[0].num_instances == 0


def evacuate(source: str, **kw: Any) -> tuple[RequestSpec, list[str]]:
    """What nova's conductor sends for an evacuate: the dead source in ignore_hosts."""
    return boot(1, ignore_hosts=(source,), **kw)


async def test_evacuate_claims_with_the_source_allocation_never_answers_the_source() -> None:
    """Issue #20: the instance still holds its allocation on the dead source (cmp0, the
    weigher's favourite). The claim merges it, as nova's claim_resources does, and the answer
    is another host; the old adopt path answered cmp0."""
    hosts = cloud(4)
    mgr, cache, placement = manager(hosts)
    spec, uuids = evacuate("cmp0")
    placement.allocations[uuids[0]] = held_on(hosts[0].uuid)
    [[sel, *alts]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert sel.service_host == "cmp1"
    assert "cmp0" not in [a.service_host for a in alts]
    assert placement.allocations[uuids[0]]["allocations"] == {
        **held_on(hosts[0].uuid)["allocations"],
        **held_on(hosts[1].uuid)["allocations"],
    }
    assert (
        json.loads(sel.allocation_request or "null")["allocations"]
        == (
            held_on(hosts[1].uuid)["allocations"]  # the destination's part: what the host runs
        )
    )
    assert cache.consumed[uuids[0]][0] == hosts[1].uuid  # not double-counted on cmp1
    assert hosts[1].num_instances == 1 and hosts[0].num_instances == 0


async def test_evacuate_to_a_named_host_claims_there_with_the_source() -> None:
    hosts = cloud(4)
    mgr, _cache, placement = manager(hosts)
    spec, uuids = evacuate("cmp0", requested_destination=Destination(host="cmp3"))
    placement.allocations[uuids[0]] = held_on(hosts[0].uuid)
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host == "cmp3"
    assert set(placement.allocations[uuids[0]]["allocations"]) == {hosts[0].uuid, hosts[3].uuid}


async def test_evacuate_whose_consumer_changes_during_the_merge_fails_as_nova_does() -> None:
    """nova: a consumer generation conflict on the doubled-up PUT raises
    AllocationUpdateFailed and the call fails; the source allocation is left alone."""
    hosts = cloud(4)
    mgr, cache, placement = manager(hosts)
    spec, uuids = evacuate("cmp0")
    placement.allocations[uuids[0]] = held_on(hosts[0].uuid)
    real = placement.claim

    async def claim(consumer_uuid: str, alloc: Any, **kw: Any) -> bool:
        if kw.get("may_have_allocations"):
            raise AllocationUpdateFailed(consumer_uuid=consumer_uuid, error="changed")
        return await real(consumer_uuid, alloc, **kw)

    placement.claim = claim  # type: ignore[method-assign,assignment]
    with pytest.raises(AllocationUpdateFailed) as err:
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert type(err.value) is AllocationUpdateFailed
    assert placement.allocations == {uuids[0]: held_on(hosts[0].uuid)}
    assert cache.consumed == {}


async def test_redelivered_evacuate_adopts_its_destination_not_the_source() -> None:
    """The first delivery merged source (cmp0) and destination (cmp2) and died unacked."""
    hosts = cloud(4)
    mgr, cache, placement = manager(hosts)
    spec, uuids = evacuate("cmp0")
    both = {**held_on(hosts[0].uuid)["allocations"], **held_on(hosts[2].uuid)["allocations"]}
    placement.allocations[uuids[0]] = {"allocations": both}
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host == "cmp2"
    assert json.loads(sel.allocation_request or "null") == held_on(hosts[2].uuid)
    assert placement.allocations[uuids[0]] == {"allocations": both}  # nothing doubled
    assert cache.consumed[uuids[0]][0] == hosts[2].uuid


@pytest.mark.parametrize(
    "rule",
    ["ignore_hosts", "requested_destination", "filtered", "cell"],
)
async def test_adopt_never_answers_a_host_the_request_excludes(rule: str) -> None:
    """A redelivery's held allocation on cmp2, which this request excludes: cmp2 is never
    the answer. The held part is then what nova's claim would merge (a move's source)."""
    hosts = cloud(4, cells=2) if rule == "cell" else cloud(4)
    kw: dict[str, Any] = {}
    if rule == "ignore_hosts":
        kw["ignore_hosts"] = ("cmp2",)
    elif rule == "requested_destination":
        kw["requested_destination"] = Destination(host="cmp1")
    elif rule == "cell":  # cmp2 is in cell0; the request wants cell1
        kw["requested_destination"] = Destination(cell=CellMapping(uuid="cell1"))
    else:
        assert hosts[2].service is not None
        hosts[2].service = dataclasses.replace(hosts[2].service, disabled=True)
    mgr, _cache, placement = manager(hosts)
    spec, uuids = boot(1, **kw)
    placement.allocations[uuids[0]] = held_on(hosts[2].uuid)
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host != "cmp2"
    assert hosts[2].uuid in placement.allocations[uuids[0]]["allocations"]


@pytest.mark.parametrize(
    "resources, known",
    [({"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}, True), (SMALL, False)],
    ids=["other-resources", "unknown-provider"],
)
async def test_held_allocation_that_does_not_fit_keeps_the_failure(
    resources: dict[str, int], known: bool
) -> None:
    hosts = cloud(3)
    mgr, cache, placement = manager(hosts)
    spec, uuids = boot(2)
    rp = hosts[2].uuid if known else str(uuid.uuid4())
    placement.allocations[uuids[1]] = held_on(rp, resources)
    with pytest.raises(AllocationUpdateFailed) as err:
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert type(err.value) is AllocationUpdateFailed  # the wire name callers know
    assert placement.allocations == {uuids[1]: held_on(rp, resources)}  # not ours to delete
    assert cache.consumed == {}


async def test_impossible_flavor_no_valid_host_leaves_no_allocation() -> None:
    mgr, _, placement = manager(cloud(3))
    spec, uuids = boot(flavor=Flavor(memory_mb=10**6, vcpus=1, root_gb=1))
    with pytest.raises(NoValidHost) as err:
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert err.value.reason == ""
    assert placement.allocations == {}


async def test_placement_down_is_no_valid_host(caplog: pytest.LogCaptureFixture) -> None:
    mgr, _, placement = manager(cloud(2))
    placement.broken = True
    spec, uuids = boot()
    with caplog.at_level(logging.ERROR), pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert "placement is down" in caplog.text


async def test_filters_drop_disabled_and_down_hosts_and_summary_is_recorded(
    caplog: pytest.LogCaptureFixture,
) -> None:
    hosts = cloud(4)
    hosts[0].service = ServiceInfo(id=1, host="cmp0", disabled=True, last_seen_up=NOW)
    hosts[1].service = ServiceInfo(id=2, host="cmp1", last_seen_up=NOW - timedelta(hours=1))
    mgr, _, _ = manager(hosts)
    spec, uuids = boot()
    with caplog.at_level(logging.DEBUG, logger="asyncsched.scheduling.manager"):
        [[sel, *_]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert sel.service_host == "cmp2"
    summary = mgr.diagnostics.recent()[-1]
    assert summary.candidates == 4
    assert summary.reasons == {"ComputeFilter": {"disabled": 1, "down": 1}}
    assert "4 candidates: ComputeFilter -2 (disabled 1, down 1) -> ok" in caplog.text


async def test_force_hosts_skips_filters_and_ignore_hosts_honoured() -> None:
    hosts = cloud(4)
    hosts[3].service = ServiceInfo(id=9, host="cmp3", disabled=True, last_seen_up=NOW)
    mgr, _, _ = manager(hosts)
    spec, uuids = boot(force_hosts=("CMP3",))
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host == "cmp3"  # forced: ComputeFilter skipped
    spec, uuids = boot(ignore_hosts=("cmp0", "CMP1"))
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host == "cmp2"


async def test_unknown_forced_host_is_no_such_host() -> None:
    mgr, _, _ = manager(cloud(2))
    spec, uuids = boot(force_hosts=("nope",))
    with pytest.raises(NoValidHost, match="No such host"):
        await mgr.select_destinations(CTX, spec, uuids, True, False)


async def test_requested_destination_cell_restricts_hosts() -> None:
    hosts = cloud(4, cells=2)
    mgr, _, _ = manager(hosts)
    spec, uuids = boot(requested_destination=Destination(cell=CellMapping(uuid="cell1")))
    result = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert {s.cell_uuid for s in result[0]} == {"cell1"}


async def test_rebuild_makes_no_claims_and_runs_only_rebuild_filters() -> None:
    hosts = cloud(3)
    hosts[1].service = ServiceInfo(id=2, host="cmp1", disabled=True, last_seen_up=NOW)
    mgr, cache, placement = manager(hosts)
    spec, uuids = boot(
        force_hosts=("cmp1",),
        force_nodes=("cmp1",),
        scheduler_hints={"_nova_check_type": ("rebuild",)},
    )
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host == "cmp1"  # ComputeFilter is not RUN_ON_REBUILD
    assert sel.allocation_request == "null" and sel.allocation_request_version is None
    assert placement.queries == [] and placement.allocations == {}
    assert cache.consumed == {}


async def test_legacy_path_without_instance_uuids() -> None:
    mgr, cache, placement = manager(cloud(4))
    spec, _ = boot(2)
    result = await mgr.select_destinations(CTX, spec, None, True, True)
    assert len(result) == 2
    assert result[0][0].service_host != result[1][0].service_host  # k+1 saw k's consumption
    assert all(r[0].allocation_request == "null" for r in result)
    assert placement.allocations == {} and cache.consumed == {}


async def test_pcpu_fallback_query() -> None:
    mgr, _, placement = manager(cloud(2))
    flavor = Flavor(memory_mb=512, vcpus=2, root_gb=1, extra_specs={"hw:cpu_policy": "dedicated"})
    spec, uuids = boot(flavor=flavor)
    [[sel, *_]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert len(placement.queries) == 2
    assert "PCPU" in placement.queries[0].merged_resources()
    assert "VCPU" in placement.queries[1].merged_resources()
    assert sel.service_host == "cmp0"


async def test_host_subset_size_spreads_choices() -> None:
    conf = config(filter_scheduler={"host_subset_size": 3})
    seen = set()
    for _ in range(30):
        mgr, _, _ = manager(cloud(5), conf)
        spec, uuids = boot()
        [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
        seen.add(sel.service_host)
    assert seen == {"cmp0", "cmp1", "cmp2"}


async def test_lone_instance_alternates_follow_its_pick_order() -> None:
    """nova's _get_alternate_hosts weighs again only after the first instance: a lone
    instance's alternates are its pick's order without the chosen host, not a new pick (with
    host_subset_size > 1 a new pick would put another random host of the subset first)."""
    conf = config(filter_scheduler={"host_subset_size": 3})
    chosen = set()
    for _ in range(30):
        mgr, _, _ = manager(cloud(5), conf)
        spec, uuids = boot()
        [[sel, *alts]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
        chosen.add(sel.service_host)
        rest = [h for h in ("cmp0", "cmp1", "cmp2", "cmp3") if h != sel.service_host]
        assert [a.service_host for a in alts] == rest[:2]
    assert chosen == {"cmp0", "cmp1", "cmp2"}


async def test_reconfigure_keeps_old_on_error() -> None:
    mgr, _, _ = manager(cloud(2))
    old = mgr.engine
    with pytest.raises(ConfigError):
        mgr.reconfigure(config(filter_scheduler={"enabled_filters": ("NoSuchFilter",)}))
    assert mgr.engine is old
    mgr.reconfigure(config(filter_scheduler={"enabled_filters": ("AllHostsFilter",)}))
    assert [f.name for f in mgr.engine.filters] == ["AllHostsFilter"]
    assert mgr.engine.columns is old.columns


def chance(hosts: list[HostState]) -> tuple[ChanceScheduler, FakePlacement]:
    """The chance driver, as app.py builds it for ``[asyncsched] driver = chance``."""
    placement = FakePlacement(hosts)
    conf = config(asyncsched={"driver": "chance"})
    return ChanceScheduler(conf, FakeCache(hosts), placement, clock=lambda: NOW), placement


async def test_chance_driver_claims_and_messages() -> None:
    hosts = cloud(6)
    mgr, placement = chance(hosts)
    spec, uuids = boot(3)
    result = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert set(placement.allocations) == set(uuids)
    for row, u in zip(result, uuids, strict=True):
        assert next(iter(placement.allocations[u]["allocations"])) == row[0].compute_node_uuid
        assert len(row) == 3
    spec, uuids = boot(ignore_hosts=tuple(h.host for h in hosts))
    with pytest.raises(NoValidHost, match="Could not find another compute"):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    for h in hosts:
        h.service = ServiceInfo(id=1, host=h.host, last_seen_up=NOW - timedelta(hours=2))
    spec, uuids = boot()
    with pytest.raises(NoValidHost, match="Is the appropriate service running"):
        await mgr.select_destinations(CTX, spec, uuids, True, True)


async def test_reasons_record_host_rules_without_zero_counts() -> None:
    mgr, _, _ = manager(cloud(4))
    spec, uuids = boot(ignore_hosts=("cmp0",))
    await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert mgr.diagnostics.recent()[-1].reasons == {"ignore_hosts": {"ignored": 1}}
    spec, uuids = boot(requested_destination=Destination(host="cmp2"))
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.service_host == "cmp2"
    assert mgr.diagnostics.recent()[-1].reasons == {}


async def test_chance_driver_legacy_path_makes_no_claims() -> None:
    sched, placement = chance(cloud(3))
    spec, _ = boot(2)
    result = await sched.select_destinations(CTX, spec, None, True, True)
    assert len(result) == 2 and all(r[0].allocation_request == "null" for r in result)
    assert placement.allocations == {} and placement.queries == []
    assert sched.plugins() == ([], [])


async def test_diagnostics_find_a_request() -> None:
    mgr, _, _ = manager(cloud(3))
    spec, uuids = boot()
    await mgr.select_destinations(CTX, spec, uuids, True, True)
    found = mgr.diagnostics.find("req-1")
    assert found is not None and found.outcome == "ok" and found.candidates == 3
    assert mgr.diagnostics.find("nope") is None


async def test_ignore_beats_force_and_force_nodes_alone() -> None:
    hosts = cloud(3)
    mgr, _, placement = manager(hosts)
    spec, uuids = boot(ignore_hosts=("cmp0",), force_hosts=("cmp0",))
    with pytest.raises(NoValidHost):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert placement.allocations == {}
    spec, uuids = boot(force_nodes=("cmp2",))
    [[sel]] = await mgr.select_destinations(CTX, spec, uuids, True, False)
    assert sel.nodename == "cmp2"


async def test_no_valid_host_says_why_at_info(caplog: pytest.LogCaptureFixture) -> None:
    """An operator sees the per-filter reasons of a failed request without DEBUG logging."""
    hosts = cloud(3)
    for i, h in enumerate(hosts):
        h.service = ServiceInfo(id=i, host=h.host, disabled=True, last_seen_up=NOW)
    mgr, _, _ = manager(hosts)
    spec, uuids = boot()
    with (
        caplog.at_level(logging.INFO, logger="asyncsched.scheduling.manager"),
        pytest.raises(NoValidHost),
    ):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    lines = [r for r in caplog.records if r.levelno == logging.INFO and "candidates" in r.message]
    assert len(lines) == 1
    assert "3 candidates: ComputeFilter -3 (disabled 3) -> NoValidHost" in lines[0].message
    caplog.clear()
    hosts[0].service = ServiceInfo(id=0, host=hosts[0].host, last_seen_up=NOW)
    hosts[0].touch()
    spec, uuids = boot()
    with caplog.at_level(logging.INFO, logger="asyncsched.scheduling.manager"):
        await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert not [r for r in caplog.records if "candidates" in r.message]  # success: DEBUG only
