"""Explain: the dry run of select_destinations over fakes of the cache and Placement."""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from asyncsched.objects.models import Flavor, RequestContext, RequestSpec
from asyncsched.scheduling.explain import explain
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState, ServiceInfo
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host

CTX = RequestContext(request_id="req-1", user_id="u", project_id="p")
WEIGHERS = {"weight_classes": ["RAMWeigher", "CPUWeigher"]}


def cloud(n: int = 6) -> list[HostState]:
    return [host(f"cmp{i}", free_ram_mb=8192 - i * 512, total_usable_ram_mb=8192) for i in range(n)]


def boot(num: int = 1) -> RequestSpec:
    flavor = Flavor(memory_mb=1024, vcpus=1, root_gb=10, name="m1.small")
    return RequestSpec(flavor=flavor, num_instances=num, project_id="p", user_id="u")


def snapshot(hosts: list[HostState]) -> list[tuple[Any, ...]]:
    return [
        (
            h.generation,
            h.free_ram_mb,
            h.vcpus_used,
            h.num_instances,
            dict(h.assumed),
            set(h.instances),
        )
        for h in hosts
    ]


async def run(
    hosts: list[HostState], spec: RequestSpec, **kw: Any
) -> tuple[Any, FakeCache, FakePlacement]:
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    conf = kw.pop("conf", None) or config(filter_scheduler=WEIGHERS)
    out = await explain(conf, cache, placement, spec, clock=lambda: NOW, **kw)
    return out, cache, placement


async def test_disabled_host_is_named_with_its_filter_and_reason_and_nothing_changes() -> None:
    hosts = cloud()
    hosts[2].service = ServiceInfo(id=3, host="cmp2", disabled=True, last_seen_up=NOW)
    before = snapshot(hosts)
    out, cache, placement = await run(hosts, boot(), host="cmp2")
    assert out.host is not None
    assert (out.host.verdict, out.host.step, out.host.reason) == (
        "rejected",
        "ComputeFilter",
        "disabled",
    )
    assert snapshot(hosts) == before
    assert placement.claims == [] and placement.allocations == {}
    assert cache.consumed == {}
    compute = next(s for s in out.steps if s.name == "ComputeFilter")
    assert (compute.hosts_in, compute.hosts_out, dict(compute.reasons)) == (6, 5, {"disabled": 1})
    assert out.outcome == "ok"


async def test_answer_matches_the_real_decision_and_leaves_no_trace_in_it() -> None:
    hosts, twin_hosts = cloud(), cloud()
    out, cache, placement = await run(hosts, boot(3))
    assert [s[0].service_host for s in out.selections] == ["cmp0", "cmp1", "cmp2"]
    conf = config(filter_scheduler=WEIGHERS)
    mgr = SchedulerManager(conf, cache, placement, clock=lambda: NOW)
    twin = SchedulerManager(
        conf, FakeCache(twin_hosts), FakePlacement(twin_hosts), clock=lambda: NOW
    )
    uuids = [str(uuid.uuid4()) for _ in range(3)]
    real = await mgr.select_destinations(CTX, boot(3), uuids, True, True)
    fresh = await twin.select_destinations(CTX, boot(3), uuids, True, True)
    assert [s[0].service_host for s in real] == [s[0].service_host for s in out.selections]
    assert [[a.service_host for a in s] for s in real] == [
        [a.service_host for a in s] for s in fresh
    ]
    assert snapshot(hosts) == snapshot(twin_hosts)


async def test_weigher_shares_add_up_to_the_weight_and_rank_orders_them() -> None:
    out, _, _ = await run(cloud(4), boot())
    assert [h.host for h in out.top] == ["cmp0", "cmp1", "cmp2", "cmp3"]
    for h in out.top:
        assert set(h.terms) == {"RAMWeigher", "CPUWeigher"}
        assert abs(sum(h.terms.values()) - h.weight) < 1e-9
    ram = [h.terms["RAMWeigher"] for h in out.top]
    assert ram == sorted(ram, reverse=True) and ram[0] > ram[-1]
    out2, _, _ = await run(cloud(4), boot(), host="cmp1")
    assert out2.host is not None and (out2.host.verdict, out2.host.rank) == ("ranked", 2)


async def test_no_room_in_placement_is_novalidhost_and_host_is_not_a_candidate() -> None:
    hosts = cloud(3)
    hosts[1].total_usable_ram_mb = 512  # Placement's inventory too small for the flavor
    placement_hosts = hosts
    out, _, _ = await run(placement_hosts, boot(), host="cmp1")
    assert out.host is not None and out.host.verdict == "not-a-candidate"
    assert out.steps[0].name == "Placement" and (out.steps[0].hosts_in, out.steps[0].hosts_out) == (
        3,
        2,
    )
    big = dataclasses.replace(boot(), flavor=Flavor(memory_mb=10**6, vcpus=1))
    out3, _, _ = await run(cloud(3), big, host="nope")
    assert out3.outcome.startswith("NoValidHost")
    assert out3.host is not None and out3.host.verdict == "unknown-host"
    assert out3.selections == ()


async def test_multi_create_beyond_what_fits_fails_whole_in_the_dry_run_too() -> None:
    hosts = cloud(2)
    out, _, placement = await run(hosts, boot(20))  # 8 vCPU x ratio, 8 GiB each: RAM runs out
    assert out.outcome.startswith("NoValidHost")
    assert placement.allocations == {} and all(not h.assumed for h in hosts)


async def test_a_failing_placement_is_named_in_the_outcome() -> None:
    hosts = cloud(2)
    cache, placement = FakeCache(hosts), FakePlacement(hosts)
    placement.broken = True
    out = await explain(config(), cache, placement, boot(), clock=lambda: NOW)
    assert out.outcome == "NoValidHost: Placement failed: placement is down"
    assert out.steps[0].hosts_out == 0 and out.selections == ()


async def test_the_placement_limit_is_said_when_it_cut_the_candidates() -> None:
    conf = config(filter_scheduler=WEIGHERS, scheduler={"max_placement_results": 3})
    out, _, _ = await run(cloud(5), boot(), conf=conf)
    assert (out.steps[0].hosts_in, out.steps[0].hosts_out) == (5, 3)
    assert out.steps[0].note is not None and "max_placement_results" in out.steps[0].note


async def test_a_host_beyond_max_placement_results_is_said_to_be_so_with_its_rules() -> None:
    """Placement returns the first 2 of 6 hosts: the others have room and fall outside the
    limit; the disabled one among them is also named disabled (the filters judge it alone)."""
    hosts = cloud(6)
    hosts[4].service = ServiceInfo(id=5, host="cmp4", disabled=True, last_seen_up=NOW)
    conf = config(filter_scheduler=WEIGHERS, scheduler={"max_placement_results": 2})
    before = snapshot(hosts)
    out, _, placement = await run(hosts, boot(), host="cmp5", conf=conf)
    assert out.steps[0].hosts_out == 2 and out.host is not None
    assert (out.host.verdict, out.host.limit, out.host.failed) == ("beyond-limit", 2, ())
    out, _, _ = await run(hosts, boot(), host="cmp4", conf=conf)
    assert out.host is not None
    assert out.host.verdict == "beyond-limit"
    assert out.host.failed == (("ComputeFilter", "disabled"),)
    assert out.host.as_dict()["failed"] == [{"step": "ComputeFilter", "reason": "disabled"}]
    assert snapshot(hosts) == before and placement.allocations == {}


async def test_a_rejected_host_is_named_with_every_rule_it_fails_not_only_the_first() -> None:
    hosts = cloud(4)
    hosts[1].service = ServiceInfo(id=2, host="cmp1", disabled=True, last_seen_up=NOW)
    hosts[1].num_io_ops = 50
    filters = {**WEIGHERS, "enabled_filters": ["ComputeFilter", "IoOpsFilter"]}
    out, _, _ = await run(hosts, boot(), host="cmp1", conf=config(filter_scheduler=filters))
    assert out.host is not None and out.host.verdict == "rejected"
    assert [step for step, _ in out.host.failed] == ["ComputeFilter", "IoOpsFilter"]
    assert (out.host.step, out.host.reason) == out.host.failed[0] == ("ComputeFilter", "disabled")


async def test_a_host_without_room_is_not_a_candidate_and_still_judged_by_the_filters() -> None:
    hosts = cloud(3)
    hosts[1].total_usable_ram_mb = 512  # Placement has no room on it
    hosts[1].service = ServiceInfo(id=2, host="cmp1", disabled=True, last_seen_up=NOW)
    out, _, _ = await run(hosts, boot(), host="cmp1")
    assert out.host is not None and out.host.verdict == "not-a-candidate"
    assert out.host.failed == (("ComputeFilter", "disabled"),)


async def test_a_rejected_host_shows_what_each_weigher_would_have_given_it() -> None:
    """cmp1 has the second most free RAM but is disabled: its RAM share, weighed beside the
    hosts that passed, sits between cmp0's and cmp2's; a ranked host shows its own row."""
    hosts = cloud(4)
    hosts[1].service = ServiceInfo(id=2, host="cmp1", disabled=True, last_seen_up=NOW)
    out, _, _ = await run(hosts, boot(), host="cmp1")
    v = out.host
    assert v is not None and v.verdict == "rejected" and v.step == "ComputeFilter"
    assert set(v.terms) == {"RAMWeigher", "CPUWeigher"} and v.weight is not None
    assert abs(sum(v.terms.values()) - v.weight) < 1e-9
    top = {h.host: h.terms["RAMWeigher"] for h in out.top}
    assert top["cmp0"] > v.terms["RAMWeigher"] > top["cmp2"]
    assert v.as_dict()["weighers"] == dict(v.terms) and v.as_dict()["weight"] == v.weight
    out, _, _ = await run(cloud(4), boot(), host="cmp2")
    ranked = out.host
    assert ranked is not None and ranked.verdict == "ranked"
    assert ranked.terms == next(h.terms for h in out.top if h.host == "cmp2")


async def test_a_host_outside_the_candidates_is_weighed_beside_the_ones_that_passed() -> None:
    conf = config(filter_scheduler=WEIGHERS, scheduler={"max_placement_results": 2})
    out, _, _ = await run(cloud(6), boot(), host="cmp5", conf=conf)
    v = out.host
    assert v is not None and v.verdict == "beyond-limit"
    # weighed beside cmp0 and cmp1 (8,192 MiB free at most; the weighers' floor is 0)
    assert v.terms == {"RAMWeigher": 5632 / 8192, "CPUWeigher": 1.0}
    assert v.weight == 1.0 + 5632 / 8192
