"""Explain: what select_destinations would do right now for a request, and why.

One dry run (``scheduling.dryrun``) of the real path, read back as an operator asks: how many
hosts were left after Placement and after each filter (with the reasons of the dropped ones),
the best hosts with each weigher's share of their weight, the Selections it would return, and
for a named host where it ranks or which filter dropped it with which reason. Nothing is
claimed, assumed or changed (see ``dryrun``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Destination, RequestSpec, Selection
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.dryrun import HOST_RULES, DryRun, DryRunManager, FirstInstance, dry_run
from asyncsched.scheduling.engine import DecisionEngine, RequestHosts
from asyncsched.scheduling.interfaces import HostCache, Placement
from asyncsched.state.host_state import HostState

PLACEMENT_STEP = "Placement"


@dataclass(frozen=True, slots=True)
class Step:
    """One step of the funnel for the first instance: hosts in, hosts out, why."""

    name: str
    hosts_in: int
    hosts_out: int
    reasons: Mapping[str, int] = field(default_factory=dict)
    note: str | None = None  # e.g. "inactive for this request", "not reached"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "in": self.hosts_in,
            "out": self.hosts_out,
            "reasons": dict(self.reasons),
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class RankedHost:
    """A host that passed every filter, with its weight split by weigher."""

    rank: int  # 1 = best weight
    host: str
    nodename: str
    cell_uuid: str
    weight: float
    terms: Mapping[str, float]

    def as_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "host": self.host,
            "nodename": self.nodename,
            "cell_uuid": self.cell_uuid,
            "weight": self.weight,
            "weighers": dict(self.terms),
        }


@dataclass(frozen=True, slots=True)
class HostVerdict:
    """Where a named host stands for this request.

    ``failed``: every rule the host fails, each filter judged on the host alone (not only the
    first that dropped it), so one answer names them all (disabled, too small, wrong AZ ...).

    ``weight`` and ``terms``: each weigher's share of the host's weight, as for the ranked
    hosts. For a host that did not pass (rejected, beyond the limit, not a candidate) it is
    what the weighers would have given it, weighed beside the hosts that passed (nova
    normalises each weigher over the hosts weighed together); None when nothing was weighed.
    """

    host: str
    # selected | ranked | rejected | beyond-limit | not-a-candidate | unknown-host
    verdict: str
    rank: int | None = None  # among the hosts that passed every filter
    step: str | None = None  # the step that dropped it
    reason: str | None = None  # that step's reason code
    failed: tuple[tuple[str, str], ...] = ()  # (rule, reason code), in the filters' order
    limit: int | None = None  # beyond-limit: [scheduler] max_placement_results
    weight: float | None = None
    terms: Mapping[str, float] = field(default_factory=dict)  # weigher -> share

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "verdict": self.verdict,
            "rank": self.rank,
            "step": self.step,
            "reason": self.reason,
            "failed": [{"step": step, "reason": code} for step, code in self.failed],
            "limit": self.limit,
            "weight": self.weight,
            "weighers": dict(self.terms),
        }


@dataclass(frozen=True, slots=True)
class Explanation:
    outcome: str  # "ok" or "NoValidHost: <reason>"
    num_instances: int
    hosts_known: int
    steps: tuple[Step, ...]
    top: tuple[RankedHost, ...]
    selections: tuple[tuple[Selection, ...], ...]
    summary: str  # the diagnostics line of the whole request (every instance)
    host: HostVerdict | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome,
            "num_instances": self.num_instances,
            "hosts_known": self.hosts_known,
            "steps": [s.as_dict() for s in self.steps],
            "top": [h.as_dict() for h in self.top],
            "selections": [
                {
                    "host": alts[0].service_host,
                    "nodename": alts[0].nodename,
                    "cell_uuid": alts[0].cell_uuid,
                    "availability_zone": alts[0].availability_zone,
                    "alternates": [a.service_host for a in alts[1:]],
                }
                for alts in self.selections
            ],
            "summary": self.summary,
            "host": self.host.as_dict() if self.host is not None else None,
            "claimed": False,
        }


async def explain(
    config: Config,
    cache: HostCache,
    placement: Placement,
    spec: RequestSpec,
    *,
    clock: Callable[[], datetime],
    host: str | None = None,
    top: int = 10,
) -> Explanation:
    """Dry-run ``spec`` and explain it (``host``: also say where that host stands)."""
    run = await dry_run(config, cache, placement, spec, clock=clock)
    known = len(cache.all_hosts())
    first = run.hosts.first if run.hosts is not None else None
    steps = _funnel(run, known, first, config.scheduler.max_placement_results)
    ranked = _ranked(run, first)
    verdict = None
    if host:
        verdict = _verdict(run, cache, first, ranked, host)
        if verdict.verdict == "not-a-candidate":
            verdict = await _outside(config, cache, placement, run, spec, host, clock=clock)
        verdict = _with_shares(verdict, run, cache, first, ranked)
    outcome = "ok" if run.error is None else f"NoValidHost: {run.error}"
    return Explanation(
        outcome=outcome,
        num_instances=max(1, spec.num_instances),
        hosts_known=known,
        steps=steps,
        top=tuple(ranked[:top]),
        selections=tuple(tuple(s) for s in run.selections),
        summary=run.summary.line(),
        host=verdict,
    )


def _funnel(run: DryRun, known: int, first: FirstInstance | None, limit: int) -> tuple[Step, ...]:
    hosts = run.hosts
    initial = hosts.initial if hosts is not None else 0
    capped = f"at most {limit} candidates ([scheduler] max_placement_results)"
    cut = capped if initial >= limit else None
    steps = [Step(PLACEMENT_STEP, known, initial, {"not-a-candidate": known - initial}, cut)]
    if hosts is None or first is None:
        return tuple(steps)
    left = initial
    for name in HOST_RULES:
        codes = first.reasons.get(name)
        if codes:
            gone = sum(codes.values())
            steps.append(Step(name, left, left - gone, codes))
            left -= gone
    spec = first.spec
    for step in run.engine.steps:
        f = step.plugin
        note: str | None = None
        if hosts.skipped_filters:
            note = "skipped: forced host"
        elif spec.is_rebuild and not f.RUN_ON_REBUILD:
            note = "not run on rebuild"
        elif not f.is_active(spec):
            note = "inactive for this request"
        elif left == 0:
            note = "not reached"
        codes = first.reasons.get(f.name, {}) if note is None else {}
        gone = sum(codes.values())
        steps.append(Step(f.name, left, left - gone, codes, note))
        left -= gone
    return tuple(steps)


def _ranked(run: DryRun, first: FirstInstance | None) -> list[RankedHost]:
    if run.hosts is None or first is None or not first.survivors:
        return []
    states = run.hosts.states
    weights = first.weights or (0.0,) * len(first.survivors)
    order = sorted(range(len(first.survivors)), key=lambda p: -weights[p])
    out = []
    for rank, pos in enumerate(order, 1):
        s = states[first.survivors[pos]]
        terms = {name: shares[pos] for name, shares in first.terms}
        out.append(RankedHost(rank, s.host, s.nodename, s.cell_uuid, weights[pos], terms))
    return out


def _with_shares(
    verdict: HostVerdict,
    run: DryRun,
    cache: HostCache,
    first: FirstInstance | None,
    ranked: Sequence[RankedHost],
) -> HostVerdict:
    """The verdict with the host's weigher shares: its row of the ranking when it passed,
    else what it would have been given beside the hosts that passed."""
    if verdict.rank is not None:
        row = next((r for r in ranked if r.rank == verdict.rank), None)
        if row is None:
            return verdict
        return dataclasses.replace(verdict, weight=row.weight, terms=row.terms)
    if verdict.verdict == "unknown-host" or run.hosts is None or first is None:
        return verdict
    state = _named(cache, verdict.host)[0]
    weight, terms = would_weigh(run.engine, cache, run.hosts, first, state)
    return dataclasses.replace(verdict, weight=weight, terms=terms)


def would_weigh(
    engine: DecisionEngine,
    cache: HostCache,
    hosts: RequestHosts,
    first: FirstInstance,
    state: HostState,
) -> tuple[float, dict[str, float]]:
    """(weight, weigher -> share) the first instance's weighing would have given ``state``
    had it passed: weighed with the hosts that did pass, as the cache holds them (the run's
    own copies carry its instances by now). Alone (no host passed) it is weighed alone,
    and nova gives a lone host no share of any weigher."""
    uuids = [hosts.states[i].uuid for i in first.survivors]
    others = [s for s in cache.get_by_uuids(uuids) if s.uuid != state.uuid]
    together = engine.start([*others, state])
    terms = {w.name: float(t[-1]) for w, t in together.weigh_terms(first.spec)}
    return sum(terms.values()), terms


def _named(cache: HostCache, name: str) -> list[HostState]:
    """The nodes of ``name``: a service host, else a node name (case-insensitive, as nova)."""
    found = cache.get_by_host_node(name)
    if not found:
        want = name.lower()
        found = [h for h in cache.all_hosts() if want in (h.host.lower(), h.nodename.lower())]
    return found


def _verdict(
    run: DryRun,
    cache: HostCache,
    first: FirstInstance | None,
    ranked: Sequence[RankedHost],
    name: str,
) -> HostVerdict:
    live = _named(cache, name)
    if not live:
        return HostVerdict(name, "unknown-host", reason="not in the host-state cache")
    hosts = run.hosts
    uuids = {h.uuid for h in live}
    base = [i for i, s in enumerate(hosts.states) if s.uuid in uuids] if hosts else []
    if hosts is None or first is None or not base:  # _outside finds out why
        return HostVerdict(name, "not-a-candidate", step=PLACEMENT_STEP, reason="not-a-candidate")
    chosen = {alts[0].compute_node_uuid for alts in run.selections}
    if uuids & chosen:
        rank = next((r.rank for r in ranked if r.nodename in {h.nodename for h in live}), None)
        return HostVerdict(name, "selected", rank=rank)
    for r in ranked:
        if any(r.nodename == h.nodename and r.host == h.host for h in live):
            return HostVerdict(name, "ranked", rank=r.rank)
    # Dropped by a rule or filter for the first instance: judge it alone to learn which.
    i = base[0]
    state = next(h for h in live if h.uuid == hosts.states[i].uuid)
    alone = run.engine.start([state], [list(hosts.cands[i])])
    skip = alone.apply_host_rules(first.spec)
    ruled = tuple((step, code) for step, codes in alone.reasons.items() for code in codes)
    failed = ruled if skip else ruled + failing_rules(run.engine, state, hosts.cands[i], first.spec)
    if failed:
        (step, code), *_ = failed
        return HostVerdict(name, "rejected", step=step, reason=code, failed=failed)
    return HostVerdict(name, "rejected", reason="not chosen (filtered after the first instance)")


def failing_rules(
    engine: DecisionEngine,
    state: HostState,
    cands: Sequence[dict[str, Any]] | None,
    spec: RequestSpec,
) -> tuple[tuple[str, str], ...]:
    """Every enabled filter that refuses ``state`` for ``spec``, each asked on its own (the
    engine stops at the first). ``cands`` None: Placement gave the host no candidate, so the
    filters that read candidates (NUMA, PCI ...) have nothing to judge and are not asked."""
    out = []
    for step in engine.steps:
        f = step.plugin
        if (spec.is_rebuild and not f.RUN_ON_REBUILD) or not f.is_active(spec):
            continue
        if f.is_state_only():
            code = f.filter_states([state], spec)[0]
        elif cands is None:
            continue
        else:
            code = f.host_passes(HostCandidate(state, list(cands), {}), spec)
        if code is not None:
            out.append((f.name, code))
    return tuple(out)


async def _outside(
    config: Config,
    cache: HostCache,
    placement: Placement,
    run: DryRun,
    spec: RequestSpec,
    name: str,
    *,
    clock: Callable[[], datetime],
) -> HostVerdict:
    """A host Placement's answer did not hold: ask Placement for this host alone (nova's
    ``in_tree`` query of a requested destination). Candidates there and the answer was cut
    at ``max_placement_results``: the host is beyond the limit, not short of room. Then every
    filter judges it, so the answer also names what else it fails."""
    state = _named(cache, name)[0]
    limit = config.scheduler.max_placement_results
    capped = run.hosts is not None and run.hosts.initial >= limit
    dest = Destination(host=state.host, node=state.nodename)
    probe = dataclasses.replace(spec, requested_destination=dest, num_instances=1)
    mgr = DryRunManager.over(config, cache, placement, clock=clock)
    cands: list[dict[str, Any]] | None = None
    try:
        hosts, probe = await mgr.traced_hosts(probe)
        cands = next((list(c) for s, c in zip(hosts.states, hosts.cands, strict=True)
                      if s.uuid == state.uuid), None)  # fmt: skip
    except NoValidHost:  # no candidate on it, or Placement failed: as the first answer
        pass
    filtered = dataclasses.replace(probe, requested_destination=spec.requested_destination)
    failed = failing_rules(run.engine, state, cands, filtered)
    if cands is not None and capped:
        return HostVerdict(
            name, "beyond-limit", step=PLACEMENT_STEP, reason="beyond-limit", failed=failed,
            limit=limit,
        )  # fmt: skip
    return HostVerdict(
        name, "not-a-candidate", step=PLACEMENT_STEP, reason="not-a-candidate", failed=failed
    )
