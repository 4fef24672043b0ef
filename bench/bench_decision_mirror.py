"""CPU per one-instance ``select_destinations`` on the mirror path, in process.

The daemon's per-request CPU bounds its boot rate (issue #10: 2 cores, 10,000 providers).
This runs the real SchedulerManager over a synthetic cloud, candidates from a real
:class:`CandidateSource` over a mirror state built from the same hosts; claims are accepted
at once (Placement's own cost is measured by ``bench_candidates``). The mirror side behaves
as the real one: accepted claims are pending until a "refresh" (every ``--refresh`` boots)
makes a new state showing them.

Two runs of the same sequence, each on a fresh cloud: ``before`` computes every request's
candidates anew (the materialising path, kept as the reference) and sorts every host for the
pick order (the eager ``Ordering.indices``, reproduced here); ``after`` reuses the state's
answer patched with the pending claims and sorts the order a head at a time. Both must choose
the same hosts. CPU time
(``time.process_time``), not wall time: the machine is shared.

The hosts are served as the daemon's host table serves them (issue #24): on one ChangeLog,
with an O(1) ``hosts_epoch``, and the GC frozen after the set-up as ``service.py`` freezes it
once READY; the first boot after each refresh (which carries the answer and the columns over
to the new state) is reported apart from the others.

    .venv/bin/python -m bench.bench_decision_mirror [--hosts 1000,10000,100000] [--boots 200]
        [--new-view] [--kept-only]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, Flavor, RequestContext, RequestSpec
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import LocalCandidates
from asyncsched.scheduling.candidates.source import MIRROR, CandidateSource
from asyncsched.scheduling.engine import Ordering
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import ChangeLog, HostState
from asyncsched.state.placement_mirror import Inventory, MirrorState, Provider
from asyncsched.state.rows import parse_supported_instances
from bench.synthetic_cloud import NOW, make_cloud
from tests.support.nova_db import SUPPORTED_INSTANCES as SUPPORTED
from tests.support.oslo_caller import request_spec
from tests.support.sched_fakes import FakeCache

CLASSES = frozenset({"VCPU", "MEMORY_MB", "DISK_GB"})
TRAITS = frozenset({"OWNER_NOVA", "COMPUTE_STATUS_DISABLED", "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2"})
CTX = RequestContext(request_id="req-bench", user_id="u", project_id="p")
SPEC = RequestSpec(
    flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1, name="m1.tiny"),
    num_instances=1,
    project_id="p",
    user_id="u",
)


def provider(i: int, h: HostState) -> Provider:
    ram, disk = h.total_usable_ram_mb, h.total_usable_disk_gb
    return Provider(
        id=i,
        uuid=h.uuid,
        name=h.host,
        generation=1,
        root_id=i,
        parent_id=None,
        inventories={
            "VCPU": Inventory(h.vcpus_total, 0, 1, h.vcpus_total, 1, 16.0),
            "MEMORY_MB": Inventory(ram, 0, 1, ram, 1, 1.5),
            "DISK_GB": Inventory(disk, 0, 1, disk, 1, 1.0),
        },
        traits=frozenset({"OWNER_NOVA", "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2"}),
        used={
            "VCPU": h.vcpus_used,
            "MEMORY_MB": ram - h.free_ram_mb,
            "DISK_GB": disk - h.free_disk_mb // 1024,
        },
    )


class Mirror:
    """The PlacementMirror's serving side: a state, claims pending until the next refresh."""

    def __init__(self, hosts: list[HostState]) -> None:
        self.providers = {i: provider(i, h) for i, h in enumerate(hosts, 1)}
        self.by_uuid = {p.uuid: i for i, p in self.providers.items()}
        self.state = MirrorState.build(dict(self.providers), TRAITS, CLASSES)
        self.pending: dict[str, Mapping[str, Any]] = {}

    def serving(self) -> tuple[MirrorState | None, str]:
        return self.state, ""

    def pending_usage(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for areq in self.pending.values():
            for rp, a in areq["allocations"].items():
                mine = out.setdefault(rp, {})
                for rc, n in a["resources"].items():
                    mine[rc] = mine.get(rc, 0) + n
        return out

    def note_claimed(self, consumer: str, allocation_request: Mapping[str, Any]) -> None:
        self.pending[consumer] = allocation_request

    def note_released(self, consumers: Iterable[str]) -> None:
        for c in consumers:
            self.pending.pop(c, None)

    def refresh_soon(self) -> None:
        return None

    def refresh(self) -> None:
        """A new state with the pending claims in the providers' usage (new values for those
        providers only, named as moved, as the real refresh makes them)."""
        moved = []
        for rp, mine in self.pending_usage().items():
            i = self.by_uuid[rp]
            p = self.providers[i]
            used = dict(p.used)
            for rc, n in mine.items():
                used[rc] = used.get(rc, 0) + n
            self.providers[i] = replace(p, used=used)
            moved.append(i)
        self.pending.clear()
        self.state = self.state.with_providers(dict(self.providers), moved)


class AcceptAll:
    """Placement's claim side, accepting every claim (its cost is not what is measured)."""

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        raise AssertionError("the mirror must answer every request here")

    async def claim(
        self, consumer_uuid: str, allocation_request: Mapping[str, Any], **kw: Any
    ) -> bool:
        return True

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        return None


def eager_indices(self: Ordering) -> Iterable[int]:
    """``Ordering.indices`` before the head-first order: every host sorted at once."""
    order = self._order
    if order is None:
        order = np.argsort(-self.weights, kind="stable").tolist()
    cur = self.cur.tolist()
    return [cur[self.chosen]] + [cur[p] for p in order if p != self.chosen]


@contextmanager
def eager_order() -> Iterator[None]:
    lazy = Ordering.indices
    Ordering.indices = eager_indices  # type: ignore[method-assign]
    try:
        yield
    finally:
        Ordering.indices = lazy  # type: ignore[method-assign]


def nova_spec() -> RequestSpec:
    """What nova's conductor sends for a real boot (bench_candidates' request): image
    properties, ``capabilities:`` and trait extra specs, so ImagePropertiesFilter and
    ComputeCapabilitiesFilter have work to do on every host."""
    spec = request_spec(vcpus=1, memory_mb=512, root_gb=1)
    return replace(spec, availability_zone=None, instance_group=None, scheduler_hints={})


def nova_hosts(hosts: list[HostState]) -> None:
    """Hosts as libvirt/KVM computes report them (what the nova spec asks for)."""
    for h in hosts:
        h.hypervisor_type = "QEMU"
        h.supported_instances = parse_supported_instances(SUPPORTED)
        h.touch()


class TableCache(FakeCache):
    """The fake cache as the daemon's HostTable serves it: every host on one ChangeLog (the
    scheduler's columns then rebuild only the hosts touched since the last request), an
    O(1) ``hosts_epoch`` (no host joins or leaves during the bench) and the real cache's
    ``get_by_uuids``."""

    def __init__(self, hosts: list[HostState], aggregates: list[Aggregate]) -> None:
        super().__init__(hosts, aggregates)
        log = ChangeLog()
        for h in hosts:
            h.changes = log

    @property
    def hosts_epoch(self) -> int:
        return 0

    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]:
        """As ``HostStateCache.get_by_uuids``: one C-level lookup per uuid."""
        get = self.hosts.get
        return [h for h in map(get, uuids) if h is not None]


class Timed(CandidateSource):
    """The source, its CPU time counted (the candidates' share of a boot)."""

    cpu = 0.0

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        t0 = time.process_time()
        try:
            return await super().get_allocation_candidates(request)
        finally:
            self.cpu += time.process_time() - t0


@dataclass(frozen=True, slots=True)
class Boots:
    """One run's measured boots: CPU ms each, the candidates' share, the host chosen, and
    whether the boot was the first after a mirror refresh (it rebuilds the host view)."""

    cpu: tuple[float, ...]
    cands: tuple[float, ...]
    chosen: tuple[str, ...]
    after_refresh: tuple[bool, ...]

    def mean(self, which: tuple[float, ...] | None = None, first: bool | None = None) -> float:
        """Mean CPU ms per boot (of ``which``, default all CPU), of the boots right after a
        refresh (``first=True``), of the others (False), or of all (None)."""
        vals = self.cpu if which is None else which
        got = [v for v, f in zip(vals, self.after_refresh, strict=True) if first in (None, f)]
        return sum(got) / len(got) if got else float("nan")


@dataclass(frozen=True, slots=True)
class Shape:
    """What a run does: ``boots`` boots of ``spec``, a mirror refresh every ``refresh``, and
    with ``new_view`` a new host view for every boot (as after a host filled up and left
    the answer: the scheduler's kept view and its column rows are looked up again)."""

    boots: int
    refresh: int
    spec: RequestSpec = SPEC
    new_view: bool = False


async def run(n: int, shape: Shape, reuse: bool) -> Boots:
    """``shape.boots`` one-instance boots on a fresh ``n``-host cloud, the GC frozen after
    the set-up as the daemon freezes it once READY (``service.py``)."""
    hosts, aggs = make_cloud(n, random.Random(7))
    if shape.spec is not SPEC:
        nova_hosts(hosts)
    mirror = Mirror(hosts)
    source = Timed(AcceptAll(), mirror)  # type: ignore[arg-type]
    source._local = LocalCandidates(reuse_answers=reuse)
    mgr = SchedulerManager(Config(), TableCache(hosts, aggs), source, clock=lambda: NOW)
    gc.collect()
    gc.freeze()
    try:
        return await _boots(mgr, mirror, source, shape)
    finally:
        gc.unfreeze()


async def _boots(mgr: SchedulerManager, mirror: Mirror, source: Timed, shape: Shape) -> Boots:
    rng = random.Random(3)
    cpu: list[float] = []
    cands: list[float] = []
    chosen: list[str] = []
    first: list[bool] = []
    refresh = shape.refresh
    for i in range(shape.boots + 5):
        if i and i % refresh == 0:
            mirror.refresh()  # the mirror's background task: not on the request path
        if shape.new_view:
            mgr._views.clear()
        instance = str(uuid.UUID(int=rng.getrandbits(128)))
        t0, c0 = time.process_time(), source.cpu
        got = await mgr.select_destinations(CTX, shape.spec, [instance], True, True)
        if i >= 5:  # the first boots build the columns and caches
            cpu.append((time.process_time() - t0) * 1000.0)
            cands.append((source.cpu - c0) * 1000.0)
            chosen.append(got[0][0].compute_node_uuid)
            first.append(i % refresh == 0)
    assert source.paths[MIRROR] == shape.boots + 5, source.paths
    return Boots(tuple(cpu), tuple(cands), tuple(chosen), tuple(first))


async def main_async(sizes: list[int], shape: Shape, which: str, kept_only: bool = False) -> None:
    print(
        f"one-instance select_destinations, mirror path, CPU ms per boot (refresh every "
        f"{shape.refresh}; {which} request{'; a new host view every boot' * shape.new_view})"
    )
    for n in sizes:
        before = None
        if not kept_only:
            with eager_order():
                before = await run(n, shape, reuse=False)
        after = await run(n, shape, reuse=True)
        mean, cands = after.mean(), after.mean(after.cands)
        if before is None:
            print(
                f"  {n:>6} hosts: {mean:6.2f} ms (candidates {cands:.2f} ms; first boot after "
                f"a refresh {after.mean(first=True):.2f} ms, the others "
                f"{after.mean(first=False):.2f} ms)"
            )
            continue
        assert before.chosen == after.chosen, "the two paths chose different hosts"
        print(
            f"  {n:>6} hosts: before {before.mean():6.2f} ms  after {mean:6.2f} ms  "
            f"({before.mean() / mean:.1f}x, same {len(after.chosen)} choices); after: "
            f"candidates {cands:.2f} ms, the rest of the decision {mean - cands:.2f} ms; "
            f"first boot after a refresh {after.mean(first=True):.2f} ms, "
            f"the others {after.mean(first=False):.2f} ms"
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", default="1000,10000")
    ap.add_argument("--boots", type=int, default=200)
    ap.add_argument("--refresh", type=int, default=20, help="boots between mirror refreshes")
    ap.add_argument(
        "--spec", choices=("tiny", "nova"), default="nova", help="m1.tiny alone, or a real boot"
    )
    ap.add_argument(
        "--new-view", action="store_true", help="a new host view every boot (a host filled up)"
    )
    ap.add_argument(
        "--kept-only",
        action="store_true",
        help="the daemon's path only, not the materialising reference (an A/B of two trees)",
    )
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.hosts.split(",")]
    spec = nova_spec() if args.spec == "nova" else SPEC
    shape = Shape(args.boots, args.refresh, spec, args.new_view)
    asyncio.run(main_async(sizes, shape, args.spec, args.kept_only))


if __name__ == "__main__":
    main()
