"""After Placement refuses a claim (409), the instance is placed again only once the mirror's
refresh that the refusal asked for is in (bounded), and not on the hosts that refresh shows
full: another scheduler's claims made them so (issue #24: two daemons on a tight cloud)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from asyncsched.scheduling.candidates import CandidateSource
from asyncsched.scheduling.candidates.source import Fits
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState
from asyncsched.state.placement_mirror import MirrorState, PlacementMirror
from asyncsched.state.placement_mirror.reader import Names, RefreshResult
from tests.support.mirror_data import Cloud
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import CTX, NOW, boot, cloud, config

ONE_VCPU = {"allocations": {"a": {"resources": {"VCPU": 1}}}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def mirror_of(state: MirrorState, clock: Clock, interval: float = 0.5) -> PlacementMirror:
    m = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement",
        interval=interval,
        max_age=30.0,
        query_timeout=1,
        clock=clock,
    )
    apply(m, state, clock.now)
    return m


def apply(m: PlacementMirror, state: MirrorState, started: float) -> None:
    """A refresh whose snapshot began at ``started``, applied now."""
    m._apply(RefreshResult(state, Names({}, {}), len(state.providers), 0), started, 20.0)


def two_hosts(used_a: int = 0) -> MirrorState:
    c = Cloud()
    a = c.compute("a", vcpu=1)
    c.compute("b", vcpu=1)
    if used_a:
        c.use(a, VCPU=used_a)
    return c.state()


async def test_refreshed_since_waits_for_a_snapshot_begun_after_the_ask() -> None:
    clock = Clock()
    m = mirror_of(two_hosts(), clock)
    clock.now += 1
    asked = m.refresh_soon()
    waiter = asyncio.ensure_future(m.refreshed_since(asked))
    await asyncio.sleep(0.01)
    apply(m, two_hosts(), asked - 0.1)  # a refresh that began before the ask: not enough
    await asyncio.sleep(0.01)
    assert not waiter.done()
    apply(m, two_hosts(used_a=1), asked + 0.1)
    assert await waiter
    assert not m.still_fits(ONE_VCPU)  # a's one VCPU taken by another scheduler
    assert m.still_fits({"allocations": {"b": {"resources": {"VCPU": 1}}}})


async def test_the_wait_is_bounded_by_one_interval_and_two_refreshes() -> None:
    clock = Clock()
    m = mirror_of(two_hosts(), clock, interval=0.05)
    assert m.refresh_bound == 0.05 + 2 * 0.02  # the last refresh took 20 ms
    clock.now += 1
    assert not await m.refreshed_since(m.refresh_soon())  # no refresh comes: it gives up


async def test_still_fits_counts_this_processs_claims_not_yet_seen() -> None:
    clock = Clock()
    m = mirror_of(two_hosts(), clock)
    assert m.still_fits(ONE_VCPU)
    m.note_claimed("mine", ONE_VCPU)
    assert not m.still_fits(ONE_VCPU)
    assert m.still_fits({"allocations": {"elsewhere": {"resources": {"VCPU": 9}}}})  # unknown


class RefusingClient:
    async def claim(self, consumer_uuid: str, allocation_request: Any, **kw: Any) -> bool:
        return False

    async def rollback(self, consumer_uuids: Any) -> None:
        return None


async def test_a_refused_claim_waits_for_the_refresh_it_asked_for() -> None:
    clock = Clock()
    m = mirror_of(two_hosts(), clock)
    src = CandidateSource(RefusingClient(), m)  # type: ignore[arg-type]
    assert await src.after_refusal("c1") is None  # no refusal: nothing to wait for
    clock.now += 1
    assert not await src.claim("c1", ONE_VCPU, project_id="p", user_id="u")
    waiter = asyncio.ensure_future(src.after_refusal("c1"))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    apply(m, two_hosts(used_a=1), clock.now)
    fits = await waiter
    assert fits is not None and not fits(ONE_VCPU)
    assert (src.refusal_waits, src.refusal_timeouts) == (1, 0)


class TwoSchedulers(FakePlacement):
    """Another scheduler took cmp0 and cmp1 just before us; our mirror's refresh after the
    first refusal shows both taken."""

    def __init__(self, hosts: list[HostState]) -> None:
        super().__init__(hosts)
        self.taken = {hosts[0].uuid, hosts[1].uuid}
        self.refuse |= self.taken
        self.waited: list[str] = []

    async def after_refusal(self, consumer_uuid: str) -> Fits | None:
        self.waited.append(consumer_uuid)
        return self._fits

    def _fits(self, alloc: Mapping[str, Any]) -> bool:
        return not set(alloc["allocations"]) & self.taken


async def test_the_retry_skips_the_hosts_the_refreshed_view_shows_full() -> None:
    hosts = cloud(3)
    placement = TwoSchedulers(hosts)
    mgr = SchedulerManager(config(), FakeCache(hosts), placement, clock=lambda: NOW)
    spec, uuids = boot()
    [[sel, *_]] = await mgr.select_destinations(CTX, spec, uuids, True, True)
    assert sel.service_host == "cmp2"
    # one refusal, not two: cmp1 (second by weight) is passed over without a claim
    assert placement.claims == [(uuids[0], hosts[0].uuid), (uuids[0], hosts[2].uuid)]
    assert placement.waited == uuids
