"""The manager keeps its view of an answer's hosts while the answer, the cell restriction and
the cache's hosts stay the same (the mirror hands out one answer object between refreshes)."""

from __future__ import annotations

import uuid

from asyncsched.objects.models import CellMapping, Destination, Flavor, RequestSpec
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.manager import SchedulerManager
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import CTX, NOW, config, host


class OneAnswer(FakePlacement):
    """Placement whose candidates answer is computed once and then handed out as the same
    object, as the mirror does between two refreshes; counts the cache lookups made."""

    def __init__(self, hosts: list, cache: FakeCache) -> None:  # type: ignore[type-arg]
        super().__init__(hosts)
        self.answer: Candidates | None = None
        self.lookups = 0
        real = cache.get_by_uuids

        def counted(uuids):  # type: ignore[no-untyped-def]
            self.lookups += 1
            return real(uuids)

        cache.get_by_uuids = counted  # type: ignore[method-assign]

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        if self.answer is None:
            self.answer = await super().get_allocation_candidates(request)
        return self.answer


def boot(**kw: object) -> tuple[RequestSpec, list[str]]:
    flavor = Flavor(memory_mb=1024, vcpus=1, root_gb=10, name="m1.small")
    return RequestSpec(flavor=flavor, project_id="p", user_id="u", **kw), [str(uuid.uuid4())]  # type: ignore[arg-type]


async def test_the_view_is_kept_for_one_answer_and_rebuilt_when_hosts_or_cells_change() -> None:
    hosts = [
        host(f"cmp{i}", cell_uuid=f"cell{i % 2}", free_ram_mb=8192 - i * 512) for i in range(4)
    ]
    cache = FakeCache(hosts)
    placement = OneAnswer(hosts, cache)
    mgr = SchedulerManager(config(), cache, placement, clock=lambda: NOW)
    first = await mgr.select_destinations(CTX, *boot(), True, False)
    again = await mgr.select_destinations(CTX, *boot(), True, False)
    assert placement.lookups == 1  # the same answer: the hosts were looked up once
    # the kept view holds the live hosts: cmp0 took the first boot, so cmp1 has most RAM
    assert (first[0][0].service_host, again[0][0].service_host) == ("cmp0", "cmp1")
    # cmp0 and cmp2 now tie at 7168 MB, cmp0 first: a stale view would pick the host that left
    del cache.hosts[hosts[0].uuid]  # cmp0 leaves the cache (deleted compute node)
    left = await mgr.select_destinations(CTX, *boot(), True, False)
    assert placement.lookups == 2 and left[0][0].service_host == "cmp2"
    cell0 = Destination(cell=CellMapping(uuid="cell0"))
    only = await mgr.select_destinations(CTX, *boot(requested_destination=cell0), True, False)
    assert placement.lookups == 3 and only[0][0].cell_uuid == "cell0"


class AnswerPerQuery(OneAnswer):
    """One answer object per query (one per flavor), as the mirror keeps them."""

    def __init__(self, hosts: list, cache: FakeCache) -> None:  # type: ignore[type-arg]
        super().__init__(hosts, cache)
        self.answers: dict[str, Candidates] = {}

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        key = request.to_querystring()
        if key not in self.answers:
            self.answers[key] = await FakePlacement.get_allocation_candidates(self, request)
        return self.answers[key]


def sized(memory_mb: int) -> tuple[RequestSpec, list[str]]:
    flavor = Flavor(memory_mb=memory_mb, vcpus=1, root_gb=1, name=f"m{memory_mb}")
    return RequestSpec(flavor=flavor, project_id="p", user_id="u"), [str(uuid.uuid4())]


async def test_a_mix_of_flavors_keeps_one_view_and_one_row_list_per_answer() -> None:
    """Flavors asked in turn: each answer's view (and the columns' rows of its host list) is
    made once, not again each time the other flavor was asked in between; past ``VIEWS``
    answers in turn, the oldest is made again."""
    from asyncsched.scheduling import columns, manager

    hosts = [host(f"cmp{i}", free_ram_mb=65536, total_usable_ram_mb=65536) for i in range(6)]
    cache = FakeCache(hosts)
    placement = AnswerPerQuery(hosts, cache)
    mgr = SchedulerManager(config(), cache, placement, clock=lambda: NOW)
    rows = 0
    real_rows = columns.HostColumns._rows

    def counted(self, states):  # type: ignore[no-untyped-def]
        nonlocal rows
        rows += 1
        return (yield from real_rows(self, states))

    columns.HostColumns._rows = counted  # type: ignore[method-assign]
    try:
        for _ in range(5):
            for mb in (512, 1024, 2048):
                await mgr.select_destinations(CTX, *sized(mb), True, False)
        assert (placement.lookups, rows) == (3, 3)
        flavors = [512 * (i + 1) for i in range(manager.VIEWS + 1)]
        for _ in range(2):
            for mb in flavors:
                await mgr.select_destinations(CTX, *sized(mb), True, False)
        # the first round made the VIEWS + 1 - 3 new ones; the second, each again (in turn,
        # each was the oldest when asked)
        made = 2 * len(flavors) - 3
        assert (placement.lookups, rows) == (3 + made, 3 + made)
    finally:
        columns.HostColumns._rows = real_rows  # type: ignore[method-assign]


class LessOne(OneAnswer):
    """The first answer, then the same answer less one root, as the mirror makes it after a
    root left (``Candidates.derived`` names the answer and the root)."""

    def __init__(self, hosts: list, cache: FakeCache, drop: str) -> None:  # type: ignore[type-arg]
        super().__init__(hosts, cache)
        self.drop, self.calls = drop, 0

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        first = await super().get_allocation_candidates(request)
        self.calls += 1
        if self.calls == 1:
            return first
        by_rp = {u: a for u, a in first.alloc_reqs_by_rp_uuid.items() if u != self.drop}
        summaries = {u: v for u, v in first.provider_summaries.items() if u != self.drop}
        areqs = [a for a in first.allocation_requests if self.drop not in a["allocations"]]
        derived = (first.alloc_reqs_by_rp_uuid, frozenset({self.drop}))
        return Candidates(areqs, summaries, by_rp, first.version, derived)


async def test_an_answer_less_a_root_gets_the_kept_view_less_its_host() -> None:
    """No lookup of the answer's hosts again: the kept view less the host that left, which
    is never chosen (it has the most free RAM), and equal to a view made anew."""
    hosts = [host(f"cmp{i}", free_ram_mb=8192 - i * 512) for i in range(5)]
    cache = FakeCache(hosts)
    placement = LessOne(hosts, cache, hosts[0].uuid)
    mgr = SchedulerManager(config(), cache, placement, clock=lambda: NOW)
    spec, ids = boot()
    first = await mgr.select_destinations(CTX, spec, ids, True, False)
    then = await mgr.select_destinations(CTX, *boot(), True, False)
    assert placement.lookups == 1
    assert first[0][0].service_host == "cmp0" and then[0][0].service_host == "cmp1"
    cands = await placement.get_allocation_candidates(None)  # type: ignore[arg-type]
    derived = await mgr._host_view(spec, cands)
    assert placement.lookups == 1
    fresh = await SchedulerManager(config(), cache, placement, clock=lambda: NOW)._host_view(
        spec, cands
    )
    assert placement.lookups == 2
    names = ["cmp1", "cmp2", "cmp3", "cmp4"]
    assert [s.host for s in derived[0]] == [s.host for s in fresh[0]] == names
    assert derived[1] == fresh[1]
