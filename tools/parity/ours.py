"""The asyncsched side of the parity suite: the same answers as nova_worker.py, from our code.

It starts from what the nova worker returns for a case: the compute_nodes and services rows
(parsed by ``state.rows`` as the host-state cache parses them) and the RequestSpec primitive
(decoded by ``objects.codec`` as the RPC server decodes it), so both sides judge identical data.
"""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.objects.codec import decode_request_spec
from asyncsched.objects.models import Aggregate, NUMATopologyLimits, RequestSpec
from asyncsched.resources.numa.consume import place_numa_pci
from asyncsched.resources.numa.fit import numa_fit_instance_to_host
from asyncsched.resources.pci.stats import pci_check_requests
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.scheduling.loader import (
    builtin_filters,
    builtin_weighers,
    load_filters,
    load_weighers,
)
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState
from asyncsched.state.rows import node_snapshot, resolve_ratios, service_info

NOW = datetime.fromisoformat("2026-01-01T12:00:00+00:00")
_TIMES = ("last_seen_up", "created_at", "updated_at", "deleted_at")


def _err(exc: BaseException) -> str:
    return f"!{type(exc).__name__}"


def config(case: dict[str, Any]) -> Config:
    """nova.conf overrides of the case as our Config (lists become tuples)."""
    conf = Config()
    for group, values in case.get("config", {}).items():
        section = getattr(conf, group)
        kw = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        conf = dataclasses.replace(conf, **{group: dataclasses.replace(section, **kw)})
    return conf


def _dates(row: dict[str, Any]) -> dict[str, Any]:
    return {
        k: datetime.fromisoformat(v) if k in _TIMES and isinstance(v, str) else v
        for k, v in row.items()
    }


def host_states(case: dict[str, Any], rows: list[dict[str, Any]], conf: Config) -> list[HostState]:
    """HostStates as the cache builds them from the rows (instances are per compute host)."""
    aggs = [
        Aggregate(
            id=a["id"],
            uuid=a["uuid"],
            name=a["name"],
            hosts=tuple(a["hosts"]),
            metadata=dict(a["metadata"]),
        )
        for a in case.get("aggregates", [])
    ]
    by_host: dict[str, set[str]] = {}
    for h in case["hosts"]:
        by_host.setdefault(h["host"], set()).update(h.get("instances", []))
    out = []
    for h, r in zip(case["hosts"], rows, strict=True):
        snap = node_snapshot(_dates(r["compute"]), h["cell"])
        assert snap is not None
        cpu, ram, disk = resolve_ratios(snap, conf.default)
        fields = {
            f.name: getattr(snap, f.name)
            for f in dataclasses.fields(snap)
            if f.name in HostState.__dataclass_fields__
        }
        hs = HostState(**fields)
        hs.hypervisor_hostname = snap.nodename
        hs.cpu_allocation_ratio, hs.ram_allocation_ratio, hs.disk_allocation_ratio = cpu, ram, disk
        hs.service = service_info(_dates(r["service"]))
        hs.aggregates = tuple(a for a in aggs if snap.host in a.hosts)
        hs.instances = set(by_host[snap.host])
        out.append(hs)
    return out


def _candidate(state: HostState) -> HostCandidate:
    return HostCandidate(state, [{"mappings": {}}])


def _filters(conf: Config, states: list[HostState], spec: RequestSpec) -> dict[str, Any]:
    known = builtin_filters()
    out: dict[str, Any] = {}
    for name in conf.filter_scheduler.enabled_filters:
        try:
            f = known[name](conf)
            if isinstance(f, ComputeFilter):
                f.clock = lambda: NOW
            out[name] = sorted(
                s.nodename for s in states if f.host_passes(_candidate(s), spec) is None
            )
        except Exception as exc:
            out[name] = _err(exc)
    return out


def _normalize(raw: list[float], lo: float | None, hi: float | None) -> list[float]:
    top = float(hi) if hi is not None else max(raw)
    bottom = float(lo) if lo is not None else min(raw)
    if top == bottom:
        return [0.0] * len(raw)
    return [(v - bottom) / (top - bottom) for v in raw]


def _weighers(
    case: dict[str, Any], conf: Config, states: list[HostState], spec: RequestSpec
) -> dict[str, Any]:
    known = builtin_weighers()
    out: dict[str, Any] = {}
    for name in sorted(case["weighers"]):
        try:
            w = known[name](conf)
            raw = []
            for s in states:
                v = float(w.weigh(_candidate(s), spec))
                v = v if w.minval is None else max(v, w.minval)
                raw.append(v if w.maxval is None else min(v, w.maxval))
            norm = _normalize(raw, w.minval, w.maxval)
            out[name] = {
                s.nodename: round(w.multiplier(s) * n, 9) for s, n in zip(states, norm, strict=True)
            }
        except Exception as exc:
            out[name] = _err(exc)
    return out


def _limits(s: HostState, spec: RequestSpec) -> NUMATopologyLimits:
    return NUMATopologyLimits(
        cpu_allocation_ratio=s.cpu_allocation_ratio,
        ram_allocation_ratio=s.ram_allocation_ratio,
        network_metadata=spec.network_metadata,
    )


def _numa(conf: Config, states: list[HostState], spec: RequestSpec) -> dict[str, Any]:
    requested = spec.numa_topology
    if requested is None:
        return {}
    reqs = spec.pci_requests.requests if spec.pci_requests is not None else ()
    out: dict[str, Any] = {}
    for s in states:
        if s.numa_topology is None or not s.numa_topology.cells:
            out[s.nodename] = None
            continue
        try:
            fit = numa_fit_instance_to_host(
                s.numa_topology,
                requested,
                limits=_limits(s, spec),
                pci_requests=reqs,
                pci_pools=s.pci_pools,
                provider_mapping=None,
                pack=conf.compute.packing_host_numa_cells_allocation_strategy,
            )
            out[s.nodename] = (
                None
                if fit.fitted is None
                else [
                    [c.id, sorted([k, v] for k, v in c.cpu_pinning.items()) or None]
                    if c.cpu_pinning
                    else [c.id, None]
                    for c in fit.fitted.cells
                ]
            )
        except Exception as exc:
            out[s.nodename] = _err(exc)
    return out


def _pci(states: list[HostState], spec: RequestSpec) -> dict[str, Any]:
    reqs = spec.pci_requests.requests if spec.pci_requests is not None else ()
    if not reqs:
        return {}
    out: dict[str, Any] = {}
    for s in states:
        try:
            out[s.nodename] = bool(pci_check_requests(s.pci_pools, reqs).ok)
        except Exception as exc:
            out[s.nodename] = _err(exc)
    return out


def _sequence(
    case: dict[str, Any], conf: Config, states: list[HostState], spec: RequestSpec
) -> list[Any]:
    """A multi-create through the DecisionEngine and the cache's consume, as the manager runs it."""
    conf = dataclasses.replace(
        conf,
        filter_scheduler=dataclasses.replace(
            conf.filter_scheduler,
            enabled_filters=tuple(case["sequence_filters"]),
            weight_classes=tuple(case["weighers"]),
        ),
    )
    filters, weighers = load_filters(conf), load_weighers(conf)
    for f in filters:
        if isinstance(f, ComputeFilter):
            f.clock = lambda: NOW
    eng = DecisionEngine(conf, filters, weighers, clock=lambda: NOW, rng=random.Random(0))
    eng.set_aggregates({a.id: a for s in states for a in s.aggregates}.values())
    cache = HostStateCache(conf)
    for s in states:  # what the cache's load indexes: the nodes of each compute service
        cache._table.by_host.setdefault(s.host, {})[s.nodename] = s
    cands: list[list[dict[str, Any]]] = [[{"mappings": {}}] for _ in states]
    req = eng.start(states, cands)
    picks: list[Any] = []
    for i in range(case["request"]["num_instances"]):
        uuid = f"0e0e0e0e-0000-4000-8000-{i:012d}"
        spec = dataclasses.replace(spec, instance_uuid=uuid)
        try:
            if not req.filter(spec, i) or not len(req):
                picks.append(None)
                break
            base = req.pick(spec).chosen_index
            h = states[base]
            limits = req.limits.get(base, {}).get("numa_topology")
            placed = place_numa_pci(
                h,
                spec,
                limits=limits if isinstance(limits, NUMATopologyLimits) else None,
                provider_mapping={},
                pack=conf.compute.packing_host_numa_cells_allocation_strategy,
            )
            cache.consume_locked(h, spec, uuid, placed=placed)
            for other in states:
                if other.host == h.host:
                    eng.refresh(other)
            g = spec.instance_group
            if g is not None:
                spec = dataclasses.replace(
                    spec,
                    instance_group=dataclasses.replace(
                        g, hosts=(*g.hosts, h.host), members=(*g.members, uuid)
                    ),
                )
            picks.append(h.nodename)
        except Exception as exc:
            picks.append(_err(exc))
            break
    return picks


def answer(case: dict[str, Any], nova: dict[str, Any]) -> dict[str, Any]:
    """Our answers in the nova worker's shape, computed from the rows and spec it returned."""
    conf = config(case)
    spec = decode_request_spec(nova["spec"])
    if nova.get("load", "ok") != "ok":  # nova could not load the hosts: only that compares
        host_states(case, nova["rows"], conf)
        return {"load": "ok", "filters": {}, "weighers": {}, "numa": {}, "pci": {}}
    states = host_states(case, nova["rows"], conf)
    out: dict[str, Any] = {
        "load": "ok",
        "filters": _filters(conf, states, spec),
        "weighers": _weighers(case, conf, states, spec),
        "numa": _numa(conf, states, spec),
        "pci": _pci(states, spec),
    }
    if case["request"].get("num_instances", 1) > 1:
        out["sequence"] = _sequence(case, conf, host_states(case, nova["rows"], conf), spec)
    return out
