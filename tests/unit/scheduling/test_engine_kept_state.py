"""A long-lived engine decides like a fresh one, whatever changed between two requests.

What a scheduler keeps across requests so a request over 100,000 hosts does no Python pass
over every host (issue #24): the column rows (rebuilt for the hosts a ChangeLog names), the
kept verdicts of ImagePropertiesFilter / ComputeCapabilitiesFilter, the per-aggregate
multiplier columns, and the caller's host and candidate lists (no longer copied per
request). Each test changes something between requests and compares the kept engine's
answer with a fresh engine's on the same hosts; any of those left stale fails it.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, ImageMeta, ImageMetaProps, RequestSpec
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import ChangeLog, HostState
from bench.synthetic_cloud import NOW, make_cloud, pipeline
from tests.support.sched_helpers import config, spec

CONF = config(filter_scheduler={"host_subset_size": 1})
SPEC = spec(
    memory_mb=2048,
    vcpus=2,
    root_gb=20,
    extra_specs={"capabilities:hypervisor_type": "QEMU"},
    image=ImageMeta(id="i", properties=ImageMetaProps(hw_architecture="x86_64")),
)


def engine(conf: Config = CONF) -> DecisionEngine:
    filters, weighers = pipeline(conf)
    return DecisionEngine(conf, filters, weighers, clock=lambda: NOW, rng=random.Random(0))


def decide(
    eng: DecisionEngine,
    states: list[HostState],
    aggs: list[Aggregate],
    cands: list[list[dict[str, Any]]] | None = None,
) -> tuple[list[str], dict[str, Counter[str]]]:
    """The first ten hosts in pick order, and the filters' reasons."""
    eng.set_aggregates(aggs)
    rh = eng.start(states, cands)
    if not rh.filter(SPEC, 0):
        return [], rh.reasons
    order = rh.pick(SPEC).indices()
    return [states[i].host for i in list(order)[:10]], rh.reasons


def cloud(n: int, seed: int) -> tuple[list[HostState], list[Aggregate]]:
    """``n`` hosts on one ChangeLog (as the daemon's HostTable has them), a per-aggregate
    RAM multiplier on one aggregate."""
    states, aggs = make_cloud(n, random.Random(seed), overrides=True)
    log = ChangeLog()
    for h in states:
        h.changes = log
    return states, aggs


def mutate(rng: random.Random, states: list[HostState], aggs: list[Aggregate]) -> list[Aggregate]:
    """One change between two requests, as the cache or an operator makes them."""
    h = rng.choice(states)
    what = rng.randrange(5)
    if what == 0:  # consumption / a compute's report
        h.free_ram_mb = rng.randrange(0, h.total_usable_ram_mb)
        h.num_instances = rng.randrange(0, 60)
    elif what == 1 and h.service is not None:  # disabled, or enabled again
        h.service = dataclasses.replace(h.service, disabled=not h.service.disabled)
    elif what == 2:  # a capability or a supported architecture changed
        h.hypervisor_type = rng.choice(["QEMU", "KVM"])
        arch = rng.choice(["x86_64", "aarch64"])
        h.supported_instances = ((arch, "qemu", "hvm"),)
    elif what == 3:  # an aggregate's multiplier changed (a new list of aggregates)
        agg = rng.choice(aggs)
        meta = {**agg.metadata, "ram_weight_multiplier": rng.choice(["-1.0", "3.0", "x"])}
        return [dataclasses.replace(a, metadata=meta) if a is agg else a for a in aggs]
    else:  # a host joins or leaves an aggregate
        agg = rng.choice(aggs)
        hosts = tuple(x for x in agg.hosts if x != h.host)
        if hosts == agg.hosts:
            hosts = (*hosts, h.host)
        return [dataclasses.replace(a, hosts=hosts) if a is agg else a for a in aggs]
    h.touch()
    return aggs


def test_a_kept_engine_decides_like_a_fresh_one_after_every_change() -> None:
    states, aggs = cloud(120, 4)
    kept = engine()
    rng = random.Random(8)
    for _ in range(80):
        for _ in range(rng.randint(1, 3)):
            aggs = mutate(rng, states, aggs)
        got = decide(kept, states, aggs)  # the same list object every time, as the manager
        assert got == decide(engine(), states, aggs)
    assert kept.verdicts.computed < 2 * len(states) + 200  # the verdicts were kept


def test_aggregate_columns_follow_renumbered_rows() -> None:
    """``forget_missing`` renumbers the column rows; the per-aggregate multipliers kept by
    row must follow (a longer kept column once gave a host another's multiplier)."""
    states, aggs = cloud(60, 5)
    kept = engine()
    decide(kept, states, aggs)
    gone = [h for h in states if any(a.metadata.get("ram_weight_multiplier") for a in h.aggregates)]
    left = [h for h in states if h not in gone[:3]]
    kept.columns.forget_missing(left)
    assert decide(kept, left, aggs) == decide(engine(), left, aggs)


class PruneOdd(BaseHostFilter):
    """Keeps only a host's first allocation request (a NUMA/PCI-style per-request prune)."""

    name = "PruneOdd"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        host.allocation_candidates[1:] = []
        return None


def test_a_pruning_plugin_changes_its_request_only_not_the_callers_lists() -> None:
    states, _ = cloud(20, 6)
    cands = [[{"n": i, "k": 0}, {"n": i, "k": 1}] for i in range(len(states))]
    shared = [list(c) for c in cands]
    eng = DecisionEngine(CONF, [PruneOdd(CONF)], [])
    rh = eng.start(states, shared)
    assert rh.filter(SPEC, 0) == len(states)
    assert all(len(rh.cands[i]) == 1 for i in range(len(states)))
    assert shared == cands  # the caller's (the host view kept for later requests) untouched
    again = eng.start(states, shared)
    assert all(len(again.cands[i]) == 2 for i in range(len(states)))


def test_equal_aggregates_read_again_are_compared_by_value_once() -> None:
    """The cache's full re-read makes new Aggregate objects of the same value: the engine
    compares their members once, not on every later request (100,000 hosts of members)."""
    _, aggs = cloud(40, 7)
    eng = engine()
    eng.set_aggregates(aggs)
    again = [dataclasses.replace(a) for a in aggs]  # equal values, new objects
    compared: list[int] = []
    real_eq = Aggregate.__eq__

    def counted(self: Aggregate, other: object) -> bool:
        compared.append(1)
        return real_eq(self, other)

    Aggregate.__eq__ = counted  # type: ignore[method-assign,assignment]
    try:
        for _ in range(5):
            eng.set_aggregates(again)
    finally:
        Aggregate.__eq__ = real_eq  # type: ignore[method-assign]
    assert len(compared) == len(aggs)  # the first call only
    changed = [dataclasses.replace(again[0], metadata={"ram_weight_multiplier": "5.0"})]
    eng.set_aggregates(changed + again[1:])
    assert "ram_weight_multiplier" in eng.aggregate_keys
