"""Host-side NUMA topology and PCI device pools, as compute nodes report them.

Parsed once per refresh from ``compute_nodes.numa_topology`` (a NUMATopology object primitive)
and ``compute_nodes.pci_stats`` (a PciDevicePoolList primitive), so no request ever decodes
JSON. Values are immutable; consumption builds new values.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from asyncsched.objects.codec.primitives import as_int, int_set, unwrap
from asyncsched.objects.cpu_spec import parse_cpu_spec


@dataclass(frozen=True, slots=True)
class NUMAPagesTopology:
    size_kb: int
    total: int
    used: int = 0
    reserved: int = 0

    @property
    def free(self) -> int:
        return self.total - self.used - self.reserved

    @property
    def free_kb(self) -> int:
        return self.free * self.size_kb

    @property
    def total_kb(self) -> int:
        return self.total * self.size_kb


@dataclass(frozen=True, slots=True)
class HostNUMACell:
    id: int
    cpuset: frozenset[int] = frozenset()  # CPUs for shared (floating) instances
    pcpuset: frozenset[int] = frozenset()  # CPUs for dedicated (pinned) instances
    memory: int = 0  # MB
    cpu_usage: int = 0
    memory_usage: int = 0
    pinned_cpus: frozenset[int] = frozenset()
    siblings: tuple[frozenset[int], ...] = ()
    mempages: tuple[NUMAPagesTopology, ...] = ()
    network_metadata_physnets: frozenset[str] = frozenset()
    network_metadata_tunneled: bool = False
    socket: int | None = None

    @property
    def free_pcpus(self) -> frozenset[int]:
        """Dedicated CPUs not pinned by any instance."""
        return self.pcpuset - self.pinned_cpus

    @property
    def avail_pcpus(self) -> int:
        return len(self.pcpuset - self.pinned_cpus)

    @property
    def avail_memory(self) -> int:
        return self.memory - self.memory_usage

    @property
    def has_threads(self) -> bool:
        """SMT (hyperthreads) present: some sibling set has more than one CPU."""
        return any(len(s) > 1 for s in self.siblings)

    def pages(self, size_kb: int) -> NUMAPagesTopology | None:
        for p in self.mempages:
            if p.size_kb == size_kb:
                return p
        return None


@dataclass(frozen=True, slots=True)
class HostNUMATopology:
    cells: tuple[HostNUMACell, ...] = ()

    @property
    def has_threads(self) -> bool:
        return any(c.has_threads for c in self.cells)

    def cell(self, cell_id: int) -> HostNUMACell | None:
        for c in self.cells:
            if c.id == cell_id:
                return c
        return None


@dataclass(frozen=True, slots=True)
class PciDevicePool:
    vendor_id: str
    product_id: str
    numa_node: int | None
    count: int
    tags: Mapping[str, str] = field(default_factory=dict)  # dev_type, physical_network, ...

    def as_match_dict(self) -> dict[str, Any]:
        """nova's flat pool dict (``PciDevicePool.to_dict`` minus count) used for spec matching."""
        out: dict[str, Any] = dict(self.tags)
        out["vendor_id"] = self.vendor_id
        out["product_id"] = self.product_id
        out["numa_node"] = self.numa_node
        return out


# --------------------------------------------------------------------------------------------
# Parsing: nova primitives -> values, read with the codec's primitives. Anything malformed
# raises ValueError (often a CodecError naming the path); the refresh logs it and keeps the
# host out of NUMA/PCI scheduling rather than crashing.
# --------------------------------------------------------------------------------------------


def _parse_pages(obj: Any) -> NUMAPagesTopology:
    d = unwrap(obj, "mempages", "NUMAPagesTopology")
    try:
        size_kb = as_int(d["size_kb"], "mempages.size_kb")
        total = as_int(d["total"], "mempages.total")
    except KeyError as exc:
        raise ValueError(f"mempages entry lacks {exc}") from None
    used = as_int(d.get("used") or 0, "mempages.used")
    reserved = as_int(d.get("reserved") or 0, "mempages.reserved")
    if size_kb <= 0:
        raise ValueError(f"mempages.size_kb must be positive: {size_kb}")
    return NUMAPagesTopology(size_kb=size_kb, total=total, used=used, reserved=reserved)


def _parse_cell(obj: Any) -> HostNUMACell:
    d = unwrap(obj, "cell", "NUMACell")
    if "id" not in d:
        raise ValueError("NUMA cell lacks an id")
    siblings_raw = d.get("siblings") or []
    if not isinstance(siblings_raw, list):
        raise ValueError("siblings: expected a list")
    mempages_raw = d.get("mempages") or []
    if not isinstance(mempages_raw, list):
        raise ValueError("mempages: expected a list")
    physnets: frozenset[str] = frozenset()
    tunneled = False
    nm = d.get("network_metadata")
    if nm is not None:
        nmd = unwrap(nm, "cell.network_metadata", "NetworkMetadata")
        pn = nmd.get("physnets") or []
        if not isinstance(pn, list) or not all(isinstance(p, str) for p in pn):
            raise ValueError("network_metadata.physnets: expected a list of strings")
        physnets = frozenset(pn)
        tunneled = bool(nmd.get("tunneled", False))
    socket = d.get("socket")
    return HostNUMACell(
        id=as_int(d["id"], "cell.id"),
        cpuset=int_set(d.get("cpuset"), "cpuset"),
        pcpuset=int_set(d.get("pcpuset"), "pcpuset"),
        memory=as_int(d.get("memory") or 0, "memory"),
        cpu_usage=as_int(d.get("cpu_usage") or 0, "cpu_usage"),
        memory_usage=as_int(d.get("memory_usage") or 0, "memory_usage"),
        pinned_cpus=int_set(d.get("pinned_cpus"), "pinned_cpus"),
        siblings=tuple(int_set(s, "siblings") for s in siblings_raw),
        mempages=tuple(_parse_pages(p) for p in mempages_raw),
        network_metadata_physnets=physnets,
        network_metadata_tunneled=tunneled,
        socket=None if socket is None else as_int(socket, "socket"),
    )


def _parse_legacy_cell(obj: Any) -> HostNUMACell:
    """Pre-Liberty cell: ``{"id", "cpus": "0-3", "mem": {"total", "used"}, "cpu_usage"}``."""
    if not isinstance(obj, dict) or "id" not in obj:
        raise ValueError("legacy NUMA cell lacks an id")
    mem = obj.get("mem") or {}
    if not isinstance(mem, dict):
        raise ValueError("legacy NUMA cell: mem is not an object")
    cpus = obj.get("cpus") or ""
    if not isinstance(cpus, str):
        raise ValueError("legacy NUMA cell: cpus is not a string")
    return HostNUMACell(
        id=as_int(obj["id"], "cell.id"),
        cpuset=parse_cpu_spec(cpus),
        memory=as_int(mem.get("total") or 0, "mem.total"),
        memory_usage=as_int(mem.get("used") or 0, "mem.used"),
        cpu_usage=as_int(obj.get("cpu_usage") or 0, "cpu_usage"),
    )


def parse_host_numa_topology(text: str | None) -> HostNUMATopology | None:
    """``compute_nodes.numa_topology`` -> HostNUMATopology; None/empty -> None.

    Accepts the NUMATopology object primitive and nova's pre-Liberty legacy format (which nova
    migrates on read). Malformed input raises ValueError.
    """
    if text is None or not text.strip():
        return None
    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"numa_topology is not JSON: {exc}") from None
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ValueError("numa_topology is not a JSON object")
    try:
        if "nova_object.name" in raw or "nova_object.data" in raw:
            data = unwrap(raw, "numa_topology", "NUMATopology")
            cells_raw = data.get("cells") or []
            if not isinstance(cells_raw, list):
                raise ValueError("cells: expected a list")
            cells = tuple(_parse_cell(c) for c in cells_raw)
        else:
            cells_raw = raw.get("cells") or []
            if not isinstance(cells_raw, list):
                raise ValueError("cells: expected a list")
            cells = tuple(_parse_legacy_cell(c) for c in cells_raw)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"malformed numa_topology: {exc!r}") from None
    if len({c.id for c in cells}) != len(cells):
        raise ValueError("numa_topology has duplicate cell ids")
    return HostNUMATopology(cells=cells)


def _parse_pool(obj: Any) -> PciDevicePool:
    if not isinstance(obj, dict):
        raise ValueError("PCI pool is not an object")
    if "nova_object.data" in obj:
        d = unwrap(obj, "pci_pool", "PciDevicePool")
        tags_raw = d.get("tags")
        if tags_raw is None:
            tags_raw = {}
        if not isinstance(tags_raw, dict):
            raise ValueError("PCI pool tags: expected an object")
    else:  # pre-object format: a flat dict, tags inline
        d = obj
        tags_raw = {
            k: v
            for k, v in obj.items()
            if k not in ("vendor_id", "product_id", "numa_node", "count")
        }
    try:
        vendor_id, product_id, count = d["vendor_id"], d["product_id"], d["count"]
    except KeyError as exc:
        raise ValueError(f"PCI pool lacks {exc}") from None
    if not isinstance(vendor_id, str) or not isinstance(product_id, str):
        raise ValueError("PCI pool vendor_id/product_id must be strings")
    numa = d.get("numa_node")
    # Null tags match exactly like absent ones (nova compares pool.get(key)); drop them.
    tags = {str(k): _tag_str(v) for k, v in tags_raw.items() if v is not None}
    return PciDevicePool(
        vendor_id=vendor_id,
        product_id=product_id,
        numa_node=None if numa is None else as_int(numa, "numa_node"),
        count=as_int(count, "count"),
        tags=tags,
    )


def _tag_str(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
        return str(v)
    raise ValueError(f"PCI pool tag value is not a string: {v!r}")


def parse_pci_pools(text: str | None) -> tuple[PciDevicePool, ...]:
    """``compute_nodes.pci_stats`` -> pools; None/empty -> ().

    Accepts the PciDevicePoolList primitive and the older list-of-dicts / single-dict format.
    Malformed input raises ValueError.
    """
    if text is None or not text.strip():
        return ()
    try:
        raw = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"pci_stats is not JSON: {exc}") from None
    if not raw:
        return ()
    if isinstance(raw, dict) and ("nova_object.data" in raw or "nova_object.name" in raw):
        data = unwrap(raw, "pci_stats", "PciDevicePoolList")
        objs = data.get("objects") or []
    elif isinstance(raw, list):
        objs = raw
    elif isinstance(raw, dict):
        objs = [raw]
    else:
        raise ValueError("pci_stats is neither an object nor a list")
    if not isinstance(objs, list):
        raise ValueError("pci_stats objects: expected a list")
    return tuple(_parse_pool(o) for o in objs)


def total_pci_by_node(pools: Iterable[PciDevicePool]) -> dict[int | None, int]:
    """Free PCI devices per host NUMA node (None: no affinity reported)."""
    out: dict[int | None, int] = {}
    for p in pools:
        out[p.numa_node] = out.get(p.numa_node, 0) + p.count
    return out
