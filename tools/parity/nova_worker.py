"""The nova side of the parity suite: runs under .venv-nova (upstream nova 34), never asyncsched.

Reads one JSON case per stdin line and writes one JSON answer per line. A case is a neutral
description of a cloud and a request (see tools/parity/cases.py); this script turns it into
what nova's scheduler really holds: compute_nodes rows through ``ComputeNode._from_db_object``
and ``HostState.update`` (so metrics, supported_instances and NUMA/PCI go through nova's own
conversions), ``RequestSpec.from_components`` with ``numa_get_constraints``. It answers with
those rows and the RequestSpec primitive (asyncsched decodes the very same data) and with
nova's decisions: the hosts each filter keeps, each weigher's weighted normalised score, the
NUMA fit per host, PCI support per host and, for a multi-create, the hosts nova's
filter/weigh/consume loop picks. An exception in nova is an answer too (``!ExcType``).
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
import warnings
from typing import Any

warnings.simplefilter("ignore")
logging.disable(logging.CRITICAL)  # nova's per-host log lines are not answers

import nova.conf  # noqa: E402
from nova import context as nova_context  # noqa: E402
from nova import objects  # noqa: E402

objects.register_all()

from nova import weights as nova_weights  # noqa: E402
from nova.scheduler import filters as sched_filters  # noqa: E402
from nova.scheduler import host_manager  # noqa: E402
from nova.scheduler import weights as sched_weights  # noqa: E402
from nova.virt import hardware  # noqa: E402
from oslo_utils import timeutils  # noqa: E402

CONF = nova.conf.CONF
CONF([], project="nova", default_config_files=[])
NOW = datetime.datetime(2026, 1, 1, 12, 0, 0)
timeutils.set_time_override(NOW)
CTX = nova_context.RequestContext("u", "p", is_admin=True)

FILTERS = {
    c.__name__: c
    for c in sched_filters.HostFilterHandler().get_matching_classes(
        ["nova.scheduler.filters.all_filters"]
    )
}
WEIGHERS = {
    c.__name__: c
    for c in sched_weights.HostWeightHandler().get_matching_classes(
        ["nova.scheduler.weights.all_weighers"]
    )
}


def _err(exc: BaseException) -> str:
    return f"!{type(exc).__name__}"


def _configure(conf: dict[str, dict[str, Any]]) -> None:
    CONF.reset()
    CONF.clear_override("enabled_filters", "filter_scheduler")
    for group, values in conf.items():
        for name, value in values.items():
            CONF.set_override(name, value, None if group == "DEFAULT" else group)


def _numa_json(cells: list[dict[str, Any]] | None) -> str | None:
    if not cells:
        return None
    out = []
    for c in cells:
        pages = [
            objects.NUMAPagesTopology(
                size_kb=p["size_kb"], total=p["total"], used=p.get("used", 0), reserved=0
            )
            for p in c["mempages"]
        ]
        out.append(
            objects.NUMACell(
                id=c["id"],
                cpuset=set(c["cpuset"]),
                pcpuset=set(c["pcpuset"]),
                memory=c["memory"],
                cpu_usage=c.get("cpu_usage", 0),
                memory_usage=c.get("memory_usage", 0),
                pinned_cpus=set(c.get("pinned_cpus", [])),
                siblings=[set(s) for s in c.get("siblings", [])],
                mempages=pages,
                network_metadata=objects.NetworkMetadata(physnets=set(), tunneled=False),
                socket=c.get("socket"),
            )
        )
    return objects.NUMATopology(cells=out)._to_json()


def _pci_json(pools: list[dict[str, Any]]) -> str | None:
    if not pools:
        return None
    plist = objects.PciDevicePoolList(
        objects=[
            objects.PciDevicePool(
                vendor_id=p["vendor_id"],
                product_id=p["product_id"],
                numa_node=p.get("numa_node"),
                tags=dict(p.get("tags", {})),
                count=p["count"],
            )
            for p in pools
        ]
    )
    return json.dumps(plist.obj_to_primitive())


def db_row(h: dict[str, Any], index: int) -> dict[str, Any]:
    """A compute_nodes row as nova's database API returns it (JSON columns as text)."""
    r = h["row"]
    metrics = r.get("metrics")
    supported = r.get("supported_instances")
    return {
        "id": index + 1,
        "uuid": h["uuid"],
        "service_id": None,
        "host": h["host"],
        "vcpus": r["vcpus"],
        "memory_mb": r["memory_mb"],
        "local_gb": r["local_gb"],
        "vcpus_used": r["vcpus_used"],
        "memory_mb_used": r["memory_mb"] - r["free_ram_mb"],
        "local_gb_used": r["local_gb"] - r["free_disk_gb"],
        "hypervisor_type": r["hypervisor_type"],
        "hypervisor_version": r["hypervisor_version"],
        "hypervisor_hostname": h["node"],
        "free_ram_mb": r["free_ram_mb"],
        "free_disk_gb": r["free_disk_gb"],
        "current_workload": 0,
        "running_vms": 0,
        "cpu_info": r["cpu_info"],
        "disk_available_least": r.get("disk_available_least"),
        "metrics": json.dumps(metrics) if metrics is not None else None,
        "stats": json.dumps(r.get("stats", {})),
        "host_ip": r.get("host_ip"),
        "numa_topology": _numa_json(r.get("numa")),
        "supported_instances": json.dumps(supported) if supported is not None else None,
        "pci_stats": _pci_json(r.get("pci_pools", [])),
        "cpu_allocation_ratio": r["cpu_allocation_ratio"],
        "ram_allocation_ratio": r["ram_allocation_ratio"],
        "disk_allocation_ratio": r["disk_allocation_ratio"],
        "mapped": 1,
        "created_at": NOW - datetime.timedelta(days=1),
        "updated_at": NOW - datetime.timedelta(seconds=5),
        "deleted_at": None,
        "deleted": 0,
    }


def service_row(h: dict[str, Any], index: int) -> dict[str, Any]:
    s = h["service"]
    seen = NOW - datetime.timedelta(seconds=s["age_s"])
    return {
        "id": index + 1,
        "uuid": h["uuid"][:-4] + "5e5e",
        "host": h["host"],
        "binary": "nova-compute",
        "topic": "compute",
        "report_count": 1,
        "disabled": s["disabled"],
        "disabled_reason": "x" if s["disabled"] else None,
        "forced_down": s["forced_down"],
        "last_seen_up": seen,
        "created_at": seen,
        "updated_at": seen,
        "version": 66,
    }


def _aggregates(case: dict[str, Any]) -> list[Any]:
    return [
        objects.Aggregate(
            context=CTX,
            id=a["id"],
            uuid=a["uuid"],
            name=a["name"],
            hosts=list(a["hosts"]),
            metadata=dict(a["metadata"]),
        )
        for a in case.get("aggregates", [])
    ]


def host_states(case: dict[str, Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """nova HostStates built as HostManager builds them; also the rows given to asyncsched.

    All nodes of one compute service share one instances dict, as in HostManager."""
    aggs = _aggregates(case)
    shared: dict[str, dict[str, Any]] = {}
    states, rows = [], []
    for i, h in enumerate(case["hosts"]):
        row, svc = db_row(h, i), service_row(h, i)
        rows.append({"compute": row, "service": svc})
        node = objects.ComputeNode._from_db_object(CTX, objects.ComputeNode(), row)
        inst = shared.setdefault(h["host"], {})
        for u in h.get("instances", []):
            inst[u] = objects.Instance(uuid=u, host=h["host"], node=h["node"])
        hs = host_manager.HostState(h["host"], h["node"], h["cell"])
        hs.update(node, dict(svc), [a for a in aggs if h["host"] in a.hosts], inst)
        states.append(hs)
    return states, rows


def _pci_requests(req: dict[str, Any]) -> Any:
    reqs = [
        objects.InstancePCIRequest(
            count=p["count"],
            spec=[dict(p["spec"])],
            alias_name=p.get("alias_name"),
            numa_policy=p.get("numa_policy"),
            request_id=p["request_id"],
            requester_id=None,
        )
        for p in req.get("pci_requests", [])
    ]
    return objects.InstancePCIRequests(requests=reqs)


def request_spec(req: dict[str, Any]) -> Any:
    f = req["flavor"]
    flavor = objects.Flavor(
        id=1,
        flavorid="f1",
        name=f.get("name", "m1"),
        memory_mb=f["memory_mb"],
        vcpus=f["vcpus"],
        root_gb=f["root_gb"],
        ephemeral_gb=f.get("ephemeral_gb", 0),
        swap=0,
        rxtx_factor=1.0,
        vcpu_weight=0,
        disabled=False,
        is_public=True,
        extra_specs=dict(f.get("extra_specs", {})),
        description=None,
    )
    image = {
        "id": "0e0e0e0e-0000-4000-8000-000000000001",
        "name": "img",
        "status": "active",
        "container_format": "bare",
        "disk_format": "qcow2",
        "min_ram": 0,
        "min_disk": 0,
        "size": 1,
        "properties": dict(req.get("image_props", {})),
    }
    image_meta = objects.ImageMeta.from_dict(image)
    numa = hardware.numa_get_constraints(flavor, image_meta)
    group = None
    g = req.get("group")
    if g is not None:
        group = objects.InstanceGroup(
            uuid="0e0e0e0e-0000-4000-8000-00000000000a",
            name="g",
            policy=g["policy"],
            policies=[g["policy"]],  # what InstanceGroup._from_db_object sets
            rules=dict(g.get("rules", {})),
            hosts=list(g.get("hosts", [])),
            members=list(g.get("members", [])),
            user_id="u",
            project_id="p",
        )
    hints = {k: list(v) for k, v in req.get("hints", {}).items()}
    spec = objects.RequestSpec.from_components(
        CTX,
        req["instance_uuid"],
        image,
        flavor,
        numa,
        _pci_requests(req),
        {"scheduler_hints": hints},
        group,
        None,
        project_id=req.get("project_id", "p"),
        user_id="u",
    )
    spec.num_instances = req.get("num_instances", 1)
    spec.instance_group = group
    spec.network_metadata = objects.NetworkMetadata(physnets=set(), tunneled=False)
    return spec


def _filters(states: list[Any], spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in CONF.filter_scheduler.enabled_filters:
        try:
            f = FILTERS[name]()
            kept = []
            for h in states:
                h.allocation_candidates = [{"mappings": {}}]  # one Placement candidate each
                if f.host_passes(h, spec):
                    kept.append(h.nodename)
            out[name] = sorted(kept)
        except Exception as exc:
            out[name] = _err(exc)
    return out


def _weighers(names: list[str], states: list[Any], spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    objs = [nova_weights.WeighedObject(h, 0.0) for h in states]
    for name in sorted(names):
        try:
            w = WEIGHERS[name]()
            raw = w.weigh_objects(objs, spec)
            norm = list(nova_weights.normalize(raw, minval=w.minval, maxval=w.maxval))
            out[name] = {
                h.nodename: round(w.weight_multiplier(h) * n, 9)
                for h, n in zip(states, norm, strict=True)
            }
        except Exception as exc:
            out[name] = _err(exc)
    return out


def _limits(h: Any, spec: Any) -> Any:
    return objects.NUMATopologyLimits(
        cpu_allocation_ratio=h.cpu_allocation_ratio,
        ram_allocation_ratio=h.ram_allocation_ratio,
        network_metadata=spec.network_metadata,
    )


def _fitted(cell: Any) -> list[Any]:
    """Host cell id, then the pinning as sorted [vCPU, pCPU] pairs (None: not pinned)."""
    pinning = cell.cpu_pinning_raw if "cpu_pinning_raw" in cell else None
    pairs = sorted([int(k), int(v)] for k, v in pinning.items()) if pinning else None
    return [cell.id, pairs]


def _numa(states: list[Any], spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.numa_topology is None:
        return out
    reqs = spec.pci_requests.requests if spec.pci_requests else []
    for h in states:
        try:
            fit = hardware.numa_fit_instance_to_host(
                h.numa_topology,
                spec.numa_topology.obj_clone(),
                None,
                limits=_limits(h, spec),
                pci_requests=reqs or None,
                pci_stats=h.pci_stats,
            )
            out[h.nodename] = None if fit is None else [_fitted(c) for c in fit.cells]
        except Exception as exc:
            out[h.nodename] = _err(exc)
    return out


def _pci(states: list[Any], spec: Any) -> dict[str, Any]:
    reqs = spec.pci_requests.requests if spec.pci_requests else []
    if not reqs:
        return {}
    out: dict[str, Any] = {}
    for h in states:
        try:
            out[h.nodename] = bool(h.pci_stats.support_requests(reqs, None))
        except Exception as exc:
            out[h.nodename] = _err(exc)
    return out


def _sequence(case: dict[str, Any], states: list[Any], spec: Any) -> dict[str, Any]:
    """nova's _schedule loop without Placement: filter, weigh, take the best, consume.

    As in RequestRun.run, each instance starts from the previous one's weighed
    list (so once-per-request filters keep their verdict). ``ties`` lists, per instance, the
    hosts that shared the best weight (any of them is a right answer)."""
    handler = sched_filters.HostFilterHandler()
    filters = [FILTERS[n]() for n in case["sequence_filters"]]
    weighers = [WEIGHERS[n]() for n in case["weighers"]]
    whandler = sched_weights.HostWeightHandler()
    picks: list[Any] = []
    ties: list[list[str]] = []
    hosts = list(states)
    for h in hosts:
        h.allocation_candidates = [{"mappings": {}}]
    for i in range(case["request"]["num_instances"]):
        uuid = f"0e0e0e0e-0000-4000-8000-{i:012d}"
        spec.instance_uuid = uuid
        try:
            hosts = list(handler.get_filtered_objects(filters, hosts, spec, i) or [])
            if not hosts:
                picks.append(None)
                break
            weighed = whandler.get_weighed_objects(weighers, hosts, spec)
            best = weighed[0].obj
            ties.append(sorted(w.obj.nodename for w in weighed if w.weight == weighed[0].weight))
            for h in hosts:
                h.allocation_candidates = [{"mappings": {}}]
            best.consume_from_request(spec)
            best.instances[uuid] = objects.Instance(uuid=uuid, host=best.host, node=best.nodename)
            if spec.instance_group is not None:
                spec.instance_group.hosts.append(best.host)
                spec.instance_group.members.append(uuid)
            picks.append(best.nodename)
            hosts = [w.obj for w in weighed]
        except Exception as exc:
            picks.append(_err(exc))
            break
    return {"picks": picks, "ties": ties}


def answer(case: dict[str, Any]) -> dict[str, Any]:
    _configure(case.get("config", {}))
    try:
        spec = request_spec(case["request"])
    except Exception as exc:  # nova refuses the request itself (the API would): no case
        return {"invalid": f"{type(exc).__name__}: {exc}"}
    rows = [
        {"compute": db_row(h, i), "service": service_row(h, i)} for i, h in enumerate(case["hosts"])
    ]
    spec_primitive = json.loads(json.dumps(spec.obj_to_primitive(), default=str))
    out: dict[str, Any] = {
        "rows": json.loads(json.dumps(rows, default=lambda d: d.isoformat())),
        "spec": spec_primitive,
    }
    try:
        states, _ = host_states(case)
    except Exception as exc:  # HostManager fails the same way: every request fails
        out.update(load=_err(exc), filters={}, weighers={}, numa={}, pci={})
        return out
    out.update(
        {
            "filters": _filters(states, spec),
            "weighers": _weighers(case["weighers"], states, spec),
            "numa": _numa(states, spec),
            "pci": _pci(states, spec),
        }
    )
    if case["request"].get("num_instances", 1) > 1:
        states, _ = host_states(case)  # fresh: the answers above must not see consumption
        seq = _sequence(case, states, request_spec(case["request"]))
        out["sequence"], out["sequence_ties"] = seq["picks"], seq["ties"]
    return out


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            result = answer(json.loads(line))
        except Exception as exc:  # the driver prints it; the worker keeps serving
            result = {"crash": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
