"""Capacity: how many more instances of a request still fit, and where.

The scheduler's own steps, in memory, never claimed: the real candidate step (pre-filters,
``GET /allocation_candidates`` without a limit, so every host is seen), then rounds over scratch
copies of the hosts. Each round runs the enabled filters as for the next instance of one
multi-create, and every host still passing takes one more instance: a claim judged on
Placement's own numbers (``dryrun.NoClaims``) and the scheduler's consumption (scalars, NUMA,
PCI) on the copy. A host leaves when a filter drops it or Placement has no room left; that
reason is what ran out. Rounds go on until no host is left. Weighers only order hosts, so they
do not change the count. The loop yields to the event loop every ``YIELD_EVERY`` instances
and every round, so the live scheduler is never stalled by a long run.

A run is bounded (issue #21): it stops after ``Bounds.max_instances`` placed instances or at
``Bounds.deadline`` (``time.monotonic()``), and then says so in ``bounded``: its ``total`` is
"at least". A huge flavor-less request (``vcpus=0&ram=1``) would otherwise place hundreds of
thousands of instances for most of a minute.

Server-group affinity (hard) puts every instance on the first host chosen: the count is that
host's. Anti-affinity leaves one per host through its filter, as in a real multi-create.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import RequestContext, RequestSpec
from asyncsched.scheduling.dryrun import DryRunManager, TracedHosts, why_no_host
from asyncsched.scheduling.interfaces import HostCache, Placement
from asyncsched.scheduling.manager import Offer
from asyncsched.scheduling.selection import availability_zone
from asyncsched.state.host_state import HostState

YIELD_EVERY = 256
#: no limit on the candidates: every host with room counts (Placement's default is 1000)
UNLIMITED = 10**9
_CTX = RequestContext(request_id="req-capacity")


@dataclass(frozen=True, slots=True)
class Capacity:
    """How many more instances of one request fit now."""

    total: int
    hosts_used: int  # hosts that take at least one
    per_az: Mapping[str, int]
    per_cell: Mapping[str, int]
    per_aggregate: Mapping[str, int]
    per_host: Mapping[str, int]  # "host/nodename" -> count (hosts taking none left out)
    excluded: Mapping[str, int]  # why hosts take none: "step: reason" -> hosts
    limited_by: Mapping[str, int]  # what stopped hosts that took some: "step: reason" -> hosts
    runs_out_first: str | None  # the limit reached first (the earliest round a host stopped)
    rounds: int
    hosts_known: int
    seconds: float
    note: str | None = None
    bounded: str | None = None  # why the run stopped early: ``total`` is then "at least"

    def as_dict(self) -> dict[str, Any]:
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, slots=True)
class Bounds:
    """How far one capacity run may go: placed instances, and a ``time.monotonic()`` deadline."""

    max_instances: int
    deadline: float


UNBOUNDED = Bounds(max_instances=2**62, deadline=math.inf)


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else value


async def capacity(
    config: Config,
    cache: HostCache,
    placement: Placement,
    spec: RequestSpec,
    *,
    clock: Callable[[], datetime],
    bounds: Bounds | None = None,
) -> Capacity:
    """Fill scratch copies of the hosts with ``spec``'s flavor until nothing fits, or until
    ``bounds`` stop the run."""
    started = time.perf_counter()
    unlimited = dataclasses.replace(
        config, scheduler=dataclasses.replace(config.scheduler, max_placement_results=UNLIMITED)
    )
    mgr = DryRunManager.over(unlimited, cache, placement, clock=clock, keep=False)
    every = cache.all_hosts()
    known = len(every)
    await mgr.engine.prepare(every)
    spec = dataclasses.replace(spec, num_instances=1)
    try:
        hosts, spec = await mgr.traced_hosts(spec)
    except NoValidHost as exc:
        why = why_no_host(exc, "no allocation candidates")
        if not why.startswith("Placement"):
            why = f"Placement: {why}"
        return _empty(known, started, {why: known})
    fill = _Fill(mgr, hosts, spec, bounds or UNBOUNDED)
    await fill.run()
    excluded = Counter({"Placement: not-a-candidate": known - hosts.initial})
    excluded.update(fill.excluded)
    return _result(config, cache, fill, known, started, excluded)


class _Fill:
    """The rounds: filter, then one more instance on every host still passing."""

    def __init__(
        self, mgr: DryRunManager, hosts: TracedHosts, spec: RequestSpec, bounds: Bounds
    ) -> None:
        self.mgr = mgr
        self.bounds = bounds
        self.fitted = 0
        self.bounded: str | None = None
        self.hosts = hosts
        self.spec = spec
        self.req = mgr.request_run(_CTX, Offer(hosts, spec, version=None, claims=True))
        self.counts = np.zeros(len(hosts.states), dtype=np.int64)
        self.excluded: Counter[str] = Counter()
        self.limited: Counter[str] = Counter()
        self.first_out: str | None = None
        self.rounds = 0
        self.placed = 0
        self.note: str | None = None
        mgr.engine.deferred = True  # rows rebuilt once per round, below

    async def run(self) -> None:
        hosts = self.hosts
        skip = hosts.apply_host_rules(self.spec)
        self._stopped({}, hosts.reasons, 0)
        done = 0
        while len(hosts) and not self._stop():
            await asyncio.sleep(0)  # a round filters every host left: yield between rounds
            index = self.rounds
            before = {k: Counter(v) for k, v in hosts.reasons.items()}
            self.mgr.engine.columns.slots(hosts.current_states())
            if not skip:
                hosts.filter(self.spec, index)
            self._stopped(before, hosts.reasons, index)
            if index == 0:
                self._affinity()
            keep = np.ones(len(hosts.cur), dtype=bool)
            out: Counter[str] = Counter()
            for pos, base in enumerate(hosts.cur.tolist()):
                why = await self._one_more(base)
                if why is not None:
                    keep[pos] = False
                    out[why] += 1
                done += 1
                if done % YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    self._stop()
                if self.bounded is not None:
                    break
            self._record(out, index)
            hosts.cur = hosts.cur[keep]
            self.rounds += 1

    def _stop(self) -> bool:
        """Is a bound reached? Records which one in ``bounded``."""
        if self.bounded is None:
            if self.fitted >= self.bounds.max_instances:
                self.bounded = f"stopped at {self.fitted} instances (capacity_max_instances)"
            elif time.monotonic() >= self.bounds.deadline:
                self.bounded = f"stopped at the deadline, {self.fitted} instances counted"
        return self.bounded is not None

    async def _one_more(self, base: int) -> str | None:
        """Claim (judged, not sent) and consume one instance on ``base``; or why not."""
        hosts = self.hosts
        cands = hosts.cands[base]
        if not cands:
            return "Placement: no-allocation-request"
        no_claims = self.mgr.no_claims
        self.placed += 1
        instance = f"capacity-{self.placed}"
        if not await no_claims.claim(instance, cands[0], project_id="", user_id=""):
            return f"Placement: {no_claims.short_of(cands[0])}"
        await self.req.consume(base, self.spec, instance)
        self.req.consumed.clear()  # the copies are thrown away: nothing to release
        self.counts[base] += 1
        self.fitted += 1
        if self.fitted >= self.bounds.max_instances:
            self._stop()
        if self.spec.instance_group is not None:
            self.spec = self.req.after_placed(self.spec, base, instance)
        return None

    def _affinity(self) -> None:
        """Hard affinity without members yet: every instance follows the first choice."""
        group = self.spec.instance_group
        hosts = self.hosts
        if group is None or group.hosts or not len(hosts):
            return
        policies = group.policies or ((group.policy,) if group.policy else ())
        if "affinity" in policies:
            chosen = hosts.pick(self.spec).chosen_index
            hosts.cur = np.asarray([chosen], dtype=np.intp)
            self.note = "server group affinity: every instance on the first host chosen"

    def _stopped(
        self, before: Mapping[str, Counter[str]], after: Mapping[str, Counter[str]], index: int
    ) -> None:
        """Hosts a host rule or filter dropped in round ``index``, by ``step: reason``."""
        out: Counter[str] = Counter()
        for name, codes in after.items():
            for code, n in (codes - before.get(name, Counter())).items():
                out[f"{name}: {code}"] += n
        self._record(out, index)

    def _record(self, out: Counter[str], index: int) -> None:
        if not out:
            return
        if index == 0:
            self.excluded.update(out)
            return
        self.limited.update(out)
        if self.first_out is None:
            self.first_out = out.most_common(1)[0][0]


def _empty(known: int, started: float, excluded: Mapping[str, int]) -> Capacity:
    return Capacity(
        total=0,
        hosts_used=0,
        per_az={},
        per_cell={},
        per_aggregate={},
        per_host={},
        excluded=dict(excluded),
        limited_by={},
        runs_out_first=None,
        rounds=0,
        hosts_known=known,
        seconds=time.perf_counter() - started,
    )


def _result(
    config: Config,
    cache: HostCache,
    fill: _Fill,
    known: int,
    started: float,
    excluded: Counter[str],
) -> Capacity:
    cell_names = {c.uuid: c.name or c.uuid for c in cache.cells()}
    per_az: Counter[str] = Counter()
    per_cell: Counter[str] = Counter()
    per_agg: Counter[str] = Counter()
    per_host: dict[str, int] = {}
    states: Sequence[HostState] = fill.hosts.states
    for base in np.flatnonzero(fill.counts).tolist():
        n = int(fill.counts[base])
        s = states[base]
        per_host[f"{s.host}/{s.nodename}"] = n
        per_az[availability_zone(s, config)] += n
        per_cell[cell_names.get(s.cell_uuid, s.cell_uuid)] += n
        for agg in s.aggregates:
            per_agg[agg.name] += n
    return Capacity(
        total=int(fill.counts.sum()),
        hosts_used=len(per_host),
        per_az=dict(per_az.most_common()),
        per_cell=dict(per_cell.most_common()),
        per_aggregate=dict(per_agg.most_common()),
        per_host=per_host,
        excluded=dict(+excluded),
        limited_by=dict(fill.limited.most_common()),
        runs_out_first=fill.first_out,
        rounds=fill.rounds,
        hosts_known=known,
        seconds=time.perf_counter() - started,
        note=fill.note,
        bounded=fill.bounded,
    )
