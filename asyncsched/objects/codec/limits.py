"""SchedulerLimits and NetworkMetadata, read from requests and written into selections."""

from __future__ import annotations

from typing import Any

from asyncsched.objects.codec.primitives import (
    as_float,
    field,
    opt_bool,
    opt_int,
    required,
    str_set,
    unwrap,
    wrap,
)
from asyncsched.objects.models import (
    NetworkMetadata,
    NUMATopologyLimits,
    SchedulerLimits,
)


def decode_network_metadata(value: Any, path: str = "network_metadata") -> NetworkMetadata:
    if value is None:
        return NetworkMetadata()
    d = unwrap(value, path, "NetworkMetadata")
    return NetworkMetadata(
        physnets=field(d, "physnets", path, str_set, frozenset()),
        tunneled=field(d, "tunneled", path, opt_bool, None) or False,
    )


def decode_limits(value: Any, path: str = "limits") -> SchedulerLimits | None:
    if value is None:
        return None
    d = unwrap(value, path, "SchedulerLimits")
    numa: NUMATopologyLimits | None = None
    raw = d.get("numa_topology")
    if raw is not None:
        p = f"{path}.numa_topology"
        n = unwrap(raw, p, "NUMATopologyLimits")
        nm = n.get("network_metadata")
        numa = NUMATopologyLimits(
            cpu_allocation_ratio=required(n, "cpu_allocation_ratio", p, as_float),
            ram_allocation_ratio=required(n, "ram_allocation_ratio", p, as_float),
            network_metadata=None
            if nm is None
            else decode_network_metadata(nm, f"{p}.network_metadata"),
        )
    return SchedulerLimits(
        numa_topology=numa,
        vcpu=field(d, "vcpu", path, opt_int, None),
        disk_gb=field(d, "disk_gb", path, opt_int, None),
        memory_mb=field(d, "memory_mb", path, opt_int, None),
    )


def encode_network_metadata(nm: NetworkMetadata) -> dict[str, Any]:
    return wrap("NetworkMetadata", {"physnets": sorted(nm.physnets), "tunneled": nm.tunneled})


def encode_numa_limits(numa: NUMATopologyLimits) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cpu_allocation_ratio": numa.cpu_allocation_ratio,
        "ram_allocation_ratio": numa.ram_allocation_ratio,
    }
    if numa.network_metadata is not None:
        data["network_metadata"] = encode_network_metadata(numa.network_metadata)
    return wrap("NUMATopologyLimits", data)


def encode_limits(limits: SchedulerLimits | None) -> dict[str, Any]:
    """SchedulerLimits 1.0 with every field set (None when unknown), as from_host_state does."""
    lim = limits or SchedulerLimits()
    return wrap(
        "SchedulerLimits",
        {
            "numa_topology": None
            if lim.numa_topology is None
            else encode_numa_limits(lim.numa_topology),
            "vcpu": lim.vcpu,
            "disk_gb": lim.disk_gb,
            "memory_mb": lim.memory_mb,
        },
    )


def limits_to_dict(limits: SchedulerLimits | None) -> dict[str, Any]:
    """nova's ``SchedulerLimits.to_dict``: only set values, NUMA limits as a primitive."""
    if limits is None:
        return {}
    out: dict[str, Any] = {}
    if limits.numa_topology is not None:
        out["numa_topology"] = encode_numa_limits(limits.numa_topology)
    for name in ("vcpu", "disk_gb", "memory_mb"):
        val = getattr(limits, name)
        if val is not None:
            out[name] = val
    return out
