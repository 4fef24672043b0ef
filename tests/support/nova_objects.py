"""Encoders for nova object primitives that only the tests, the demo and the benchmarks need.

The daemon decodes requests and encodes selections (``asyncsched.objects.codec``); building a
RequestSpec, an aggregate, an instance list or a context the way nova-conductor and the
computes send them, and the compute node rows' NUMA topology and PCI pools, is the callers'
side, so it lives here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asyncsched.objects.codec import encode_limits, encode_network_metadata, wrap
from asyncsched.objects.codec.image import TYPED_PROPS
from asyncsched.objects.host_resources import HostNUMACell, HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    Aggregate,
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    InstanceNUMATopology,
    InstancePCIRequests,
    NetworkRequest,
    RequestContext,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
    SchedulerRetries,
)


def _sorted_wrap(name: str, data: dict[str, Any]) -> dict[str, Any]:
    """A primitive with its changes sorted, as the compute node rows were always seeded."""
    return wrap(name, data, sorted(data))


def encode_aggregate(agg: Aggregate) -> dict[str, Any]:
    return wrap(
        "Aggregate",
        {
            "id": agg.id,
            "uuid": agg.uuid,
            "name": agg.name,
            "hosts": list(agg.hosts),
            "metadata": dict(agg.metadata),
        },
    )


def encode_instance_list(instance_uuids: Sequence[str], host: str | None = None) -> dict[str, Any]:
    """A minimal InstanceList primitive, as ``update_instance_info`` carries it."""
    objects = []
    for uuid in instance_uuids:
        data: dict[str, Any] = {"uuid": uuid}
        if host is not None:
            data["host"] = host
        objects.append(wrap("Instance", data))
    return wrap("InstanceList", {"objects": objects})


def encode_flavor(f: Flavor) -> dict[str, Any]:
    return wrap(
        "Flavor",
        {
            "id": f.id,
            "name": f.name,
            "memory_mb": f.memory_mb,
            "vcpus": f.vcpus,
            "root_gb": f.root_gb,
            "ephemeral_gb": f.ephemeral_gb,
            "flavorid": f.flavorid,
            "swap": f.swap,
            "rxtx_factor": f.rxtx_factor,
            "vcpu_weight": f.vcpu_weight,
            "disabled": f.disabled,
            "is_public": f.is_public,
            "extra_specs": dict(f.extra_specs),
            "description": f.description,
        },
    )


def encode_image_props(p: ImageMetaProps) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in TYPED_PROPS:
        val = getattr(p, name)
        if name == "traits_required":
            if val:
                data[name] = sorted(val)
        elif val is not None:
            data[name] = val
    data.update(p.other)
    return wrap("ImageMetaProps", data)


def encode_image(i: ImageMeta) -> dict[str, Any]:
    data: dict[str, Any] = {
        name: getattr(i, name)
        for name in (
            "id",
            "name",
            "status",
            "disk_format",
            "container_format",
            "owner",
            "size",
            "min_ram",
            "min_disk",
        )
        if getattr(i, name) is not None
    }
    data["properties"] = encode_image_props(i.properties)
    return wrap("ImageMeta", data)


def encode_numa_topology(t: InstanceNUMATopology) -> dict[str, Any]:
    cells = []
    for c in t.cells:
        data: dict[str, Any] = {
            "id": c.id,
            "cpuset": sorted(c.cpuset),
            "pcpuset": sorted(c.pcpuset),
            "memory": c.memory,
            "pagesize": c.pagesize,
            "cpu_policy": c.cpu_policy,
            "cpu_thread_policy": c.cpu_thread_policy,
        }
        if c.cpuset_reserved is not None:
            data["cpuset_reserved"] = sorted(c.cpuset_reserved)
        if c.cpu_topology is not None:
            data["cpu_topology"] = wrap(
                "VirtCPUTopology",
                {
                    "sockets": c.cpu_topology.sockets,
                    "cores": c.cpu_topology.cores,
                    "threads": c.cpu_topology.threads,
                },
            )
        if c.cpu_pinning is not None:
            data["cpu_pinning_raw"] = {str(k): v for k, v in c.cpu_pinning.items()}
        cells.append(wrap("InstanceNUMACell", data))
    return wrap(
        "InstanceNUMATopology",
        {
            "instance_uuid": t.instance_uuid,
            "cells": cells,
            "emulator_threads_policy": t.emulator_threads_policy,
        },
    )


def encode_pci_requests(r: InstancePCIRequests) -> dict[str, Any]:
    reqs = [
        wrap(
            "InstancePCIRequest",
            {
                "count": q.count,
                "spec": [dict(s) for s in q.spec],
                "alias_name": q.alias_name,
                "is_new": q.is_new,
                "request_id": q.request_id,
                "requester_id": q.requester_id,
                "numa_policy": q.numa_policy,
            },
        )
        for q in r.requests
    ]
    data: dict[str, Any] = {"requests": reqs}
    if r.instance_uuid is not None:
        data["instance_uuid"] = r.instance_uuid
    return wrap("InstancePCIRequests", data)


def encode_instance_group(g: InstanceGroup) -> dict[str, Any]:
    return wrap(
        "InstanceGroup",
        {
            "id": g.id,
            "uuid": g.uuid,
            "name": g.name,
            "user_id": g.user_id,
            "project_id": g.project_id,
            "policy": g.policy,
            "policies": list(g.policies),
            "members": list(g.members),
            "hosts": list(g.hosts),
            "_rules": dict(g.rules),
        },
    )


def encode_destination(d: Destination) -> dict[str, Any]:
    data: dict[str, Any] = {
        "host": d.host,
        "node": d.node,
        "aggregates": list(d.aggregates) if d.aggregates else None,
        "forbidden_aggregates": sorted(d.forbidden_aggregates),
        "allow_cross_cell_move": d.allow_cross_cell_move,
    }
    if d.cell is not None:
        data["cell"] = wrap(
            "CellMapping",
            {
                "id": d.cell.id,
                "uuid": d.cell.uuid,
                "name": d.cell.name,
                "disabled": d.cell.disabled,
            },
        )
    return wrap("Destination", data)


def encode_retry(r: SchedulerRetries) -> dict[str, Any]:
    nodes = [wrap("ComputeNode", {"host": h, "hypervisor_hostname": n}) for h, n in r.hosts]
    return wrap(
        "SchedulerRetries",
        {"num_attempts": r.num_attempts, "hosts": wrap("ComputeNodeList", {"objects": nodes})},
    )


def encode_request_group(g: RequestGroup) -> dict[str, Any]:
    return wrap(
        "RequestGroup",
        {
            "use_same_provider": g.use_same_provider,
            "resources": dict(g.resources),
            "required_traits": sorted(g.required_traits),
            "forbidden_traits": sorted(g.forbidden_traits),
            "aggregates": [list(a) for a in g.aggregates],
            "forbidden_aggregates": sorted(g.forbidden_aggregates),
            "requester_id": g.requester_id,
            "provider_uuids": list(g.provider_uuids),
            "in_tree": g.in_tree,
        },
    )


def encode_request_level_params(p: RequestLevelParams) -> dict[str, Any]:
    return wrap(
        "RequestLevelParams",
        {
            "root_required": sorted(p.root_required),
            "root_forbidden": sorted(p.root_forbidden),
            "same_subtree": [list(s) for s in p.same_subtree],
        },
    )


def encode_request_spec(spec: RequestSpec) -> dict[str, Any]:
    """Our :class:`RequestSpec` -> a RequestSpec 1.15 primitive as nova-conductor sends it."""
    data: dict[str, Any] = {
        "flavor": encode_flavor(spec.flavor),
        "image": None if spec.image is None else encode_image(spec.image),
        "numa_topology": None
        if spec.numa_topology is None
        else encode_numa_topology(spec.numa_topology),
        "pci_requests": None
        if spec.pci_requests is None
        else encode_pci_requests(spec.pci_requests),
        "project_id": spec.project_id,
        "user_id": spec.user_id,
        "availability_zone": spec.availability_zone,
        "num_instances": spec.num_instances,
        "ignore_hosts": None if spec.ignore_hosts is None else list(spec.ignore_hosts),
        "force_hosts": None if spec.force_hosts is None else list(spec.force_hosts),
        "force_nodes": None if spec.force_nodes is None else list(spec.force_nodes),
        "requested_destination": None
        if spec.requested_destination is None
        else encode_destination(spec.requested_destination),
        "retry": None if spec.retry is None else encode_retry(spec.retry),
        "limits": None if spec.limits is None else encode_limits(spec.limits),
        "instance_group": None
        if spec.instance_group is None
        else encode_instance_group(spec.instance_group),
        "scheduler_hints": {k: list(v) for k, v in spec.scheduler_hints.items()},
        "instance_uuid": spec.instance_uuid,
        "security_groups": wrap(
            "SecurityGroupList",
            {"objects": [wrap("SecurityGroup", {"name": n}) for n in spec.security_groups]},
        ),
        "network_metadata": encode_network_metadata(spec.network_metadata),
        "is_bfv": spec.is_bfv,
        "requested_resources": [encode_request_group(g) for g in spec.requested_resources],
        "request_level_params": encode_request_level_params(spec.request_level_params),
        "requested_networks": wrap(
            "NetworkRequestList",
            {
                "objects": [
                    wrap(
                        "NetworkRequest",
                        {
                            k: getattr(n, k)
                            for k in NetworkRequest.__dataclass_fields__
                            if getattr(n, k) is not None
                        },
                    )
                    for n in spec.requested_networks
                ]
            },
        ),
    }
    if spec.id is not None:
        data["id"] = spec.id
    return wrap("RequestSpec", data)


def encode_context(ctx: RequestContext) -> dict[str, Any]:
    """A context dict (without prefix) as nova's ``RequestContext.to_dict`` shapes it."""
    out: dict[str, Any] = dict(ctx.raw)
    out.update(
        {
            "request_id": ctx.request_id,
            "global_request_id": ctx.global_request_id,
            "user_id": ctx.user_id,
            "user": ctx.user_id,
            "project_id": ctx.project_id,
            "project": ctx.project_id,
            "user_name": ctx.user_name,
            "project_name": ctx.project_name,
            "roles": list(ctx.roles),
            "is_admin": ctx.is_admin,
            "read_deleted": ctx.read_deleted,
            "timestamp": None
            if ctx.timestamp is None
            else ctx.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%f"),
            "remote_address": ctx.remote_address,
            "auth_token": ctx.auth_token,
        }
    )
    return out


def _cell_primitive(c: HostNUMACell) -> dict[str, Any]:
    return _sorted_wrap(
        "NUMACell",
        {
            "id": c.id,
            "cpuset": sorted(c.cpuset),
            "pcpuset": sorted(c.pcpuset),
            "memory": c.memory,
            "cpu_usage": c.cpu_usage,
            "memory_usage": c.memory_usage,
            "pinned_cpus": sorted(c.pinned_cpus),
            "siblings": [sorted(s) for s in c.siblings],
            "mempages": [
                _sorted_wrap(
                    "NUMAPagesTopology",
                    {
                        "size_kb": p.size_kb,
                        "total": p.total,
                        "used": p.used,
                        "reserved": p.reserved,
                    },
                )
                for p in c.mempages
            ],
            "network_metadata": _sorted_wrap(
                "NetworkMetadata",
                {
                    "physnets": sorted(c.network_metadata_physnets),
                    "tunneled": c.network_metadata_tunneled,
                },
            ),
            "socket": c.socket,
        },
    )


def host_numa_topology_primitive(topo: HostNUMATopology) -> dict[str, Any]:
    """HostNUMATopology -> NUMATopology 1.2 object primitive (json.dumps it for the DB)."""
    return _sorted_wrap("NUMATopology", {"cells": [_cell_primitive(c) for c in topo.cells]})


def pci_pools_primitive(pools: Sequence[PciDevicePool]) -> dict[str, Any]:
    """Pools -> PciDevicePoolList 1.1 object primitive (json.dumps it for the DB)."""
    return _sorted_wrap(
        "PciDevicePoolList",
        {
            "objects": [
                _sorted_wrap(
                    "PciDevicePool",
                    {
                        "product_id": p.product_id,
                        "vendor_id": p.vendor_id,
                        "numa_node": p.numa_node,
                        "tags": dict(p.tags),
                        "count": p.count,
                    },
                )
                for p in pools
            ]
        },
    )
