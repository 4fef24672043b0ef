"""A straightforward per-host-object implementation of the decision path, nova style.

One HostCandidate per host, ``host_passes`` per host and filter, ``weigh`` per host and
weigher, Python-list normalisation and a full sort. It is the semantic yardstick for the fast
engine (parity tests run both on randomised clouds) and the baseline of bench_scheduling.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


def filter_hosts(
    filters: Sequence[BaseHostFilter],
    hosts: list[HostCandidate],
    spec: RequestSpec,
    index: int,
    reasons: dict[str, Counter[str]] | None = None,
) -> list[HostCandidate]:
    """nova's get_filtered_hosts (host rules, then filters in order, stop at zero)."""
    dest = spec.requested_destination
    if dest is not None and dest.host is not None:
        hosts = [
            h
            for h in hosts
            if h.state.host == dest.host and (not dest.node or h.state.nodename == dest.node)
        ]
    ignore = [x.lower() for x in spec.ignore_hosts or ()]
    force_hosts = [x.lower() for x in spec.force_hosts or ()]
    force_nodes = set(spec.force_nodes or ())
    if ignore or force_hosts or force_nodes:
        if ignore:
            hosts = [h for h in hosts if h.state.host.lower() not in ignore]
            if not hosts:
                return []
        if force_hosts:
            hosts = [h for h in hosts if h.state.host.lower() in force_hosts]
        if force_nodes:
            hosts = [h for h in hosts if h.state.nodename in force_nodes]
        if not spec.scheduler_hints.get("_nova_check_type") and (force_hosts or force_nodes):
            return hosts
    rebuild = spec.is_rebuild
    for f in filters:
        if not hosts:
            break
        if index > 0 and f.run_filter_once_per_request:
            continue
        if rebuild and not f.RUN_ON_REBUILD:
            continue
        kept: list[HostCandidate] = []
        for h in hosts:
            code = f.host_passes(h, spec)
            if code is None:
                kept.append(h)
            elif reasons is not None:
                reasons.setdefault(f.name, Counter())[code] += 1
        hosts = kept
    return hosts


def weigh_hosts(
    weighers: Sequence[BaseHostWeigher], hosts: list[HostCandidate], spec: RequestSpec
) -> list[float]:
    """nova's get_weighed_objects, returning the weights in input order."""
    totals = [0.0] * len(hosts)
    if len(hosts) <= 1:
        return totals
    for w in weighers:
        raw: list[float] = []
        for h in hosts:
            value = float(w.weigh(h, spec))
            if w.minval is not None:
                value = max(value, w.minval)
            if w.maxval is not None:
                value = min(value, w.maxval)
            raw.append(value)
        hi = float(w.maxval) if w.maxval is not None else max(raw)
        lo = float(w.minval) if w.minval is not None else min(raw)
        if lo == hi:
            continue
        for i, h in enumerate(hosts):
            totals[i] += w.multiplier(h.state) * ((raw[i] - lo) / (hi - lo))
    return totals


def sort_and_pick(
    config: Config, hosts: list[HostCandidate], weights: list[float], rng: random.Random
) -> list[HostCandidate]:
    """``[chosen] + rest`` in weighed order, with host_subset_size and the tie shuffle."""
    order = sorted(range(len(hosts)), key=weights.__getitem__, reverse=True)
    fs = config.filter_scheduler
    if fs.shuffle_best_same_weighed_hosts and order:
        best = weights[order[0]]
        ties = [p for p in order if weights[p] == best]
        rng.shuffle(ties)
        order = ties + order[len(ties) :]
    if fs.host_subset_size <= 1 and not fs.shuffle_best_same_weighed_hosts:
        chosen = order[0]
    else:
        chosen = rng.choice(order[: min(fs.host_subset_size, len(order))])
    return [hosts[chosen]] + [hosts[p] for p in order if p != chosen]


def decide(
    config: Config,
    filters: Sequence[BaseHostFilter],
    weighers: Sequence[BaseHostWeigher],
    states: Sequence[HostState],
    spec: RequestSpec,
    *,
    index: int = 0,
    cands: Sequence[list[dict[str, Any]]] | None = None,
    rng: random.Random | None = None,
) -> list[HostCandidate]:
    """One instance's decision on fresh per-host objects: the baseline the bench measures."""
    hosts = [
        HostCandidate(s, list(cands[i]) if cands is not None else []) for i, s in enumerate(states)
    ]
    hosts = filter_hosts(filters, hosts, spec, index)
    if not hosts:
        return []
    weights = weigh_hosts(weighers, hosts, spec)
    return sort_and_pick(config, hosts, weights, rng or random.Random())
