"""The event loop's longest hold in the mirror-backed decision path at 100,000 providers.

One process: the real SchedulerManager over a synthetic cloud, candidates from a real
:class:`CandidateSource` whose :class:`LocalCandidates` answers from a MirrorState of the same
hosts (``bench_decision_mirror``'s Mirror, host table and accept-all claims). The 1 ms ticker
of ``tests/support/loop_gap.py`` records the longest step between two loop turns (loop thread
CPU, GC paused), printed beside the call's whole CPU time in the same run, for:

* ``cold``: the first request on a new state (a full answer built);
* ``joined``: the first request after a refresh where a root joined the answer (a host was
  full, a delete freed it: the answer is built anew);
* ``boot``: one boot on a state whose answer is kept;
* ``touched``: one boot after every host was touched (as the heartbeats of 100,000 computes
  leave every column row stale);
* ``multi``: one call of ``--instances`` instances;
* ``boots``: ``--boots`` one-instance boots in a row, the mirror refreshed every 20 (the hot
  path: its CPU is the mean per boot, its hold the longest of any; no candidates alone);
* ``flavors``: as ``boots``, the boots' flavors taken in turn from ``--flavors`` sizes, the
  mirror refreshed every ``--refresh-every`` boots (a cloud booting a mix of flavors while
  its claims land: each refresh makes a new state), after one boot of each flavor;
* ``left``: 10 one-instance boots, each after a refresh where a host of the answer is full
  (it leaves: the answer is patched, the host view made again or derived), mean CPU per
  boot and longest hold of any (last: the hosts stay full).

Each step is measured twice: the whole call, and the candidates call alone
(``get_allocation_candidates`` on a fresh copy of the same condition). A/B in the same run:
``old`` builds in one piece (every size in ``SIZES`` set past any cloud), ``new`` gives the
loop a turn every ``columns.BUILD_CHUNK`` roots of an answer (four times as many rows of a
class column), every ``WRITE_CHUNK`` host rows, ``JUDGE_CHUNK`` hosts judged by a filter,
``VIEW_CHUNK`` hosts looked up, and after each filter over ``FILTER_YIELD_HOSTS`` hosts.
CPU times are the loop thread's; the machine is shared.

    .venv/bin/python -m bench.bench_hold_mirror [--hosts 100000] [--instances 1000] [--boots 60]
        [--flavors 6] [--refresh-every 4]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling import columns as host_columns
from asyncsched.scheduling import engine, manager, verdicts
from asyncsched.scheduling.candidates import LocalCandidates, columns
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.placement_mirror import Provider
from bench.bench_decision_mirror import CTX, AcceptAll, Mirror, TableCache, Timed, nova_hosts
from bench.bench_decision_mirror import nova_spec as boot_spec
from bench.synthetic_cloud import NOW, make_cloud
from tests.support.loop_gap import max_gap_while

#: the sizes of the pieces between two turns given to the loop; "old" sets them past any cloud
SIZES = (
    (columns, "BUILD_CHUNK"),
    (host_columns, "WRITE_CHUNK"),
    (engine, "FILTER_YIELD_HOSTS"),
    (verdicts, "JUDGE_CHUNK"),
    (manager, "VIEW_CHUNK"),
)
STEPS = ("cold", "joined", "boot", "touched", "multi", "boots", "flavors", "left")


class Seen(Timed):
    """The source, keeping the last request it was asked (to ask it again alone)."""

    last: ResourceRequest | None = None

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        self.last = request
        return await super().get_allocation_candidates(request)


@dataclass(frozen=True, slots=True)
class Held:
    """One step: longest hold and whole CPU, ms, of the call and of its candidates alone."""

    hold: float
    cpu: float
    cands_hold: float
    cands_cpu: float


def filled(p: Provider) -> Provider:
    """``p`` with every class used up to its capacity: in no answer."""
    return replace(p, used={rc: inv.capacity for rc, inv in p.inventories.items()})


class Cloud:
    """A cloud of ``n`` hosts served by the mirror, and the manager deciding over it."""

    def __init__(self, n: int) -> None:
        hosts, aggs = make_cloud(n, random.Random(7))
        nova_hosts(hosts)
        self.mirror = Mirror(hosts)
        self.source = Seen(AcceptAll(), self.mirror)  # type: ignore[arg-type]
        self.mgr = SchedulerManager(
            Config(), TableCache(hosts, aggs), self.source, clock=lambda: NOW
        )
        self.hosts = hosts
        self.rng = random.Random(3)
        self.full = 0

    async def call(self, num: int, flavor: int = 0) -> Any:
        ids = [str(uuid.UUID(int=self.rng.getrandbits(128))) for _ in range(num)]
        spec = boot_spec()
        if flavor:  # another size: 1 + flavor % 4 vCPUs, 512 MB more memory per flavor
            f = replace(spec.flavor, vcpus=1 + flavor % 4, memory_mb=512 * (1 + flavor))
            spec = replace(spec, flavor=f)
        got = await self.mgr.select_destinations(
            CTX, replace(spec, num_instances=num), ids, True, True
        )
        assert len(got) == num
        return got

    async def candidates(self) -> Any:
        assert self.source.last is not None
        return await self.source.get_allocation_candidates(self.source.last)

    def cold(self) -> None:
        """As the daemon's first request: no answer, no caches of one, no host view. The
        previous ones are freed here, before the call (at 100,000 hosts a whole answer's
        objects take ~70 ms to free in one piece; the daemon never drops them all: its
        ``LocalCandidates`` lives as long as it does)."""
        self.source._local = LocalCandidates()
        self.mgr._views.clear()

    async def touched(self) -> None:
        for h in self.hosts:
            h.touch()

    async def left(self) -> None:
        """A host of the answer full on the next state (boots filled it): it leaves."""
        self.full += 1
        m = self.mirror
        m.providers[self.full] = filled(m.providers[self.full])
        m.state = m.state.with_providers(dict(m.providers), [self.full])

    async def joined(self) -> None:
        """A host full on one state (out of the answer), freed on the next: it joins."""
        self.full += 1
        m = self.mirror
        p = m.providers[self.full]
        m.providers[self.full] = filled(p)
        m.state = m.state.with_providers(dict(m.providers), [self.full])
        await self.call(1)  # the answer over the state it is full on (a patched answer)
        m.providers[self.full] = p
        m.state = m.state.with_providers(dict(m.providers), [self.full])


async def held(cloud: Cloud, prepare: Callable[[], Awaitable[None]], num: int) -> Held:
    await prepare()
    alone = await max_gap_while(cloud.candidates())
    await prepare()
    whole = await max_gap_while(cloud.call(num))
    return Held(whole.longest * 1e3, whole.total * 1e3, alone.longest * 1e3, alone.total * 1e3)


async def lefts(cloud: Cloud, count: int) -> Held:
    """``count`` one-instance boots, each after a refresh where a host of the answer is full:
    mean CPU per boot, longest hold of any (no candidates alone: in the daemon every answer
    goes through the manager, whose view of the last one a new one is derived from)."""
    hold = cpu = 0.0
    for _ in range(count):
        await cloud.left()
        one = await max_gap_while(cloud.call(1))
        hold, cpu = max(hold, one.longest), cpu + one.total
    return Held(hold * 1e3, cpu * 1e3 / count, float("nan"), float("nan"))


async def boots(cloud: Cloud, count: int, flavors: int = 1, every: int = 20) -> Held:
    """``count`` one-instance boots of ``flavors`` sizes in turn, a refresh showing the
    claims every ``every``."""
    for f in range(1, flavors):  # each flavor's first answer (the cold step's cost) first
        await cloud.call(1, f)
    hold = cpu = 0.0
    for i in range(count):
        if i % every == 0:
            cloud.mirror.refresh()
        one = await max_gap_while(cloud.call(1, i % flavors))
        hold, cpu = max(hold, one.longest), cpu + one.total
    return Held(hold * 1e3, cpu * 1e3 / count, float("nan"), float("nan"))


async def variant(n: int, num: int, count: int, flavors: int, every: int) -> dict[str, Held]:
    cloud = Cloud(n)
    gc.collect()
    gc.freeze()
    try:
        await cloud.call(1)  # the columns and caches built once

        async def cold() -> None:
            cloud.cold()

        async def nothing() -> None:
            return None

        return {
            "cold": await held(cloud, cold, 1),
            "joined": await held(cloud, cloud.joined, 1),
            "boot": await held(cloud, nothing, 1),
            "touched": await held(cloud, cloud.touched, 1),
            "multi": await held(cloud, nothing, num),
            "boots": await boots(cloud, count),
            "flavors": await boots(cloud, count, flavors, every),
            "left": await lefts(cloud, 10),
        }
    finally:
        gc.unfreeze()


async def measure(n: int, num: int, count: int, flavors: int, every: int) -> None:
    got: dict[str, dict[str, Held]] = {}
    new = [getattr(m, name) for m, name in SIZES]
    for variant_name, sizes in (("old", [1 << 62] * len(SIZES)), ("new", new)):
        for (m, name), size in zip(SIZES, sizes, strict=True):
            setattr(m, name, size)
        try:
            got[variant_name] = await variant(n, num, count, flavors, every)
        finally:
            for (m, name), size in zip(SIZES, new, strict=True):
                setattr(m, name, size)
    print(f"{n} providers, multi = {num} instances; longest loop hold and CPU, ms (old/new)")
    print(f"{'step':7} {'call hold':>15} {'call cpu':>15} {'cands hold':>15} {'cands cpu':>15}")
    for step in STEPS:
        o, w = got["old"][step], got["new"][step]
        cols = [
            (o.hold, w.hold),
            (o.cpu, w.cpu),
            (o.cands_hold, w.cands_hold),
            (o.cands_cpu, w.cands_cpu),
        ]
        print(f"{step:7} " + " ".join(f"{a:>7.1f}/{b:<7.1f}" for a, b in cols))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--instances", type=int, default=1000)
    ap.add_argument("--boots", type=int, default=60)
    ap.add_argument("--flavors", type=int, default=6, help="sizes taken in turn (flavors step)")
    ap.add_argument("--refresh-every", type=int, default=4, help="boots (flavors step)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    asyncio.run(
        measure(args.hosts, args.instances, args.boots, args.flavors, args.refresh_every)
    )
    print(f"({time.perf_counter() - t0:.0f} s wall)")


if __name__ == "__main__":
    main()
