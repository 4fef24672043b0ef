"""Fitting a guest NUMA topology onto a host: nova's numa_fit_instance_to_host semantics.

Guest cells are tried on permutations of host cells (host cells ordered to spread, or pack, by
free memory, CPU usage or free pinned CPUs, and PCI locality). A guest cell fits a host cell
when its page size is offered with enough free pages, its memory fits, it has enough shared
CPUs within ``cpu_allocation_ratio`` or enough free dedicated CPUs packed per the thread policy
(plus one for isolated emulator threads on the first guest cell). A full assignment must then
satisfy the PCI requests with their NUMA affinity policy and the network NUMA affinity.

Unlike nova, every failure keeps a reason: a short code the filter counts and a sentence per
host cell saying what was missing, for DEBUG logs and diagnosis.

Differences from nova on purpose: results are immutable (nova mutates the request's cells), and
the per (host cell, guest cell) fit cache stores the fitted cell itself, so a cached pair never
carries pinning computed for another host cell.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from asyncsched.objects.host_resources import (
    HostNUMACell,
    HostNUMATopology,
    PciDevicePool,
    total_pci_by_node,
)
from asyncsched.objects.models import (
    InstanceNUMACell,
    InstanceNUMATopology,
    InstancePCIRequest,
    NetworkMetadata,
    NUMATopologyLimits,
)
from asyncsched.resources.pci.stats import pci_check_requests

MEMPAGES_SMALL = -1
MEMPAGES_LARGE = -2
MEMPAGES_ANY = -3

CPU_SHARED = "shared"
CPU_DEDICATED = "dedicated"
CPU_MIXED = "mixed"
THREAD_PREFER = "prefer"
THREAD_ISOLATE = "isolate"
THREAD_REQUIRE = "require"
EMULATOR_ISOLATE = "isolate"

_PINNED = (CPU_DEDICATED, CPU_MIXED)

# Rank of a failure: the furthest stage any attempt reached explains the host best.
_STAGE = {
    "numa:pagesize": 1,
    "numa:pages-insufficient": 2,
    "numa:memory": 2,
    "numa:no-pinned-cpus": 3,
    "numa:cpus": 3,
    "numa:thread-policy": 4,
    "numa:cpu-limit": 5,
    "numa:ram-limit": 5,
    "pci": 6,
    "numa:network-affinity": 7,
}


@dataclass(frozen=True, slots=True)
class FitResult:
    """``fitted`` is the guest topology with host cell ids and pinning, or None with a reason."""

    fitted: InstanceNUMATopology | None
    code: str | None = None  # short reason code when it does not fit
    detail: str = ""  # human-readable, one clause per host cell tried

    @property
    def ok(self) -> bool:
        return self.fitted is not None

    def __bool__(self) -> bool:
        return self.fitted is not None


@dataclass(frozen=True, slots=True)
class _CellMiss:
    code: str
    detail: str

    @property
    def stage(self) -> int:
        if self.code.startswith("numa:pagesize-") and self.code.endswith("-unavailable"):
            return _STAGE["numa:pagesize"]
        if self.code.startswith("pci:"):
            return _STAGE["pci"]
        return _STAGE.get(self.code, 0)


def _pagesize_name(size: int) -> str:
    return {MEMPAGES_SMALL: "small", MEMPAGES_LARGE: "large", MEMPAGES_ANY: "any"}.get(
        size, str(size)
    )


def _can_fit_pages(cell: HostNUMACell, size_kb: int, mem_kb: int, use_free: bool) -> bool | None:
    """None when the cell does not offer ``size_kb`` pages at all."""
    pages = cell.pages(size_kb)
    if pages is None:
        return None
    avail = pages.free_kb if use_free else pages.total_kb
    return mem_kb <= avail and mem_kb % size_kb == 0


def _select_pagesize(cell: HostNUMACell, inst: InstanceNUMACell) -> int | _CellMiss:
    """Page size (KiB) the guest cell's memory is backed by on this host cell."""
    requested = inst.pagesize or 0
    mem_kb = inst.memory * 1024
    sizes = sorted((p.size_kb for p in cell.mempages), reverse=True)
    if requested == MEMPAGES_SMALL:
        candidates = sizes[-1:]
    elif requested == MEMPAGES_LARGE:
        candidates = sizes[:-1]
    elif requested == MEMPAGES_ANY:
        candidates = sizes
    else:
        if cell.pages(requested) is None:
            offered = ", ".join(str(s) for s in sorted(sizes)) or "none"
            return _CellMiss(
                f"numa:pagesize-{requested}-unavailable",
                f"host cell {cell.id} offers no {requested} KiB pages (offers {offered})",
            )
        candidates = [requested]
    for size in candidates:
        if _can_fit_pages(cell, size, mem_kb, use_free=True):
            return size
    if not candidates:
        return _CellMiss(
            f"numa:pagesize-{_pagesize_name(requested)}-unavailable",
            f"host cell {cell.id} offers no {_pagesize_name(requested)} pages "
            f"(offers {', '.join(str(s) for s in sorted(sizes)) or 'none'} KiB)",
        )
    free = ", ".join(f"{p.free}x{p.size_kb}KiB" for p in cell.mempages if p.size_kb in candidates)
    return _CellMiss(
        "numa:pages-insufficient",
        f"host cell {cell.id}: {inst.memory} MiB in {_pagesize_name(requested)} pages does not "
        f"fit the free pages ({free}) or is not a multiple of the page size",
    )


def _threads_per_core(cell: HostNUMACell) -> int:
    return max((len(s) for s in cell.siblings), default=1) or 1


def _free_sibling_sets(cell: HostNUMACell) -> list[list[int]]:
    """Free dedicated CPUs grouped by core, each core's CPUs in ascending order."""
    free = cell.free_pcpus
    if cell.siblings:
        sets = [sorted(s & free) for s in cell.siblings]
    else:  # no sibling data reported: every dedicated CPU is its own core
        sets = [[c] for c in sorted(free)]
    return [s for s in sets if s]


def _pinning(
    threads: int, cores: list[list[int]], vcpus: list[int]
) -> list[tuple[int, int]] | None:
    if threads * len(cores) < len(vcpus):
        return None
    usable = itertools.chain.from_iterable(c[:threads] for c in cores)
    return list(zip(vcpus, usable, strict=False))


def _reserved(
    cores: list[list[int]], pinning: list[tuple[int, int]], n: int, isolate: bool
) -> frozenset[int] | None:
    """The ``n`` host CPUs for isolated emulator threads, outside the guest's pinning.

    None without pinning, as nova's ``_get_reserved``: a guest cell with no dedicated vCPU
    gets no emulator CPU there."""
    if not n or not pinning:
        return None
    pinned = {p for _, p in pinning}
    if isolate:
        left = [c for c in cores if not (set(c) & pinned)]
    else:
        left = [[x for x in c if x not in pinned] for c in cores]
    out = list(itertools.chain.from_iterable(left))[:n]
    return frozenset(out) or None


def _pack_onto_cores(
    cell: HostNUMACell, inst: InstanceNUMACell, reserved: int
) -> tuple[dict[int, int], frozenset[int] | None] | _CellMiss:
    """Pin the guest's dedicated vCPUs to free host CPUs honouring the thread policy.

    nova's strategy: prefer whole free cores (most threads first) so guest threads line up with
    host siblings; ``require`` insists on sibling threads; ``isolate`` uses one thread per fully
    free core (only possible on hosts without SMT, or legacy ``vcpu_pin_set`` hosts); ``prefer``
    falls back to any free CPUs.
    """
    tpc = _threads_per_core(cell)
    vcpus = sorted(inst.pcpuset)
    free_sets = _free_sibling_sets(cell)
    by_threads: dict[int, list[list[int]]] = {}
    for s in free_sets:
        for t in range(1, len(s) + 1):
            by_threads.setdefault(t, []).append(s)
    policy = inst.cpu_thread_policy
    pin: list[tuple[int, int]] | None = None
    res: frozenset[int] | None = None

    if policy == THREAD_ISOLATE:
        if tpc not in by_threads:
            return _CellMiss(
                "numa:thread-policy",
                f"host cell {cell.id}: thread policy isolate needs fully free cores, none left",
            )
        if tpc != 1 and cell.pcpuset != cell.cpuset:
            return _CellMiss(
                "numa:thread-policy",
                f"host cell {cell.id}: thread policy isolate cannot be met on a host with SMT "
                "(Placement should have excluded HW_CPU_HYPERTHREADING hosts)",
            )
        pin = _pinning(1, by_threads[tpc], vcpus)
        res = _reserved(by_threads.get(1, []), pin or [], reserved, isolate=True)
        if not pin or (reserved and not res):
            return _CellMiss(
                "numa:thread-policy",
                f"host cell {cell.id}: {len(vcpus)} vCPU(s)"
                f"{' + 1 emulator CPU' if reserved else ''} need as many fully free cores "
                f"for thread policy isolate, {len(by_threads[tpc])} free",
            )
    else:
        if policy == THREAD_REQUIRE and tpc <= 1:
            return _CellMiss(
                "numa:thread-policy",
                f"host cell {cell.id}: thread policy require but the host has no SMT siblings",
            )
        for threads in sorted(by_threads, reverse=True):
            if policy == THREAD_REQUIRE and threads <= 1:
                continue
            pin = _pinning(threads, by_threads[threads], vcpus)
            res = _reserved(by_threads.get(1, []), pin or [], reserved, isolate=False)
            if pin is None or (reserved and not res):
                pin = None
                continue
            break
        if policy != THREAD_REQUIRE and not pin:
            singles = [[c] for c in itertools.chain.from_iterable(by_threads.get(1, []))]
            pin = _pinning(1, singles, vcpus)
            res = _reserved(singles, pin or [], reserved, isolate=False)
        # nova tests the pinning for None: a mixed guest cell with no dedicated vCPU pins
        # nothing and still fits (unless it must hold the isolated emulator thread)
        if pin is None or (reserved and not res):
            why = (
                "thread policy require needs that many free sibling threads"
                if policy == THREAD_REQUIRE
                else "not enough free dedicated CPUs"
            )
            return _CellMiss(
                "numa:thread-policy" if policy == THREAD_REQUIRE else "numa:no-pinned-cpus",
                f"host cell {cell.id}: cannot pin {len(vcpus)} vCPU(s)"
                f"{' + 1 emulator CPU' if reserved else ''}: {why}",
            )
    return dict(pin), res


def fit_instance_cell(
    cell: HostNUMACell,
    inst: InstanceNUMACell,
    limits: NUMATopologyLimits | None = None,
    reserved: int = 0,
) -> InstanceNUMACell | _CellMiss:
    """One guest cell on one host cell: the fitted cell (host id, page size, pinning) or why not."""
    pinned = inst.cpu_policy in _PINNED
    pagesize = _fit_memory(cell, inst, pinned)
    if isinstance(pagesize, _CellMiss):
        return pagesize
    miss = _cpu_count_miss(cell, inst, pinned, reserved)
    if miss is not None:
        return miss
    pinning: Mapping[int, int] | None = inst.cpu_pinning
    cpuset_reserved = inst.cpuset_reserved
    if pinned:
        packed = _pin_cell(cell, inst, reserved)
        if isinstance(packed, _CellMiss):
            return packed
        pinning, cpuset_reserved = packed
    if (not pinned or inst.cpu_policy == CPU_MIXED) and limits is not None:
        miss = _limits_miss(cell, inst, limits)
        if miss is not None:
            return miss
    return replace(
        inst,
        id=cell.id,
        pagesize=pagesize,
        cpu_pinning=pinning,
        cpuset_reserved=cpuset_reserved,
    )


def _fit_memory(cell: HostNUMACell, inst: InstanceNUMACell, pinned: bool) -> int | _CellMiss | None:
    """The guest cell's page size on this host cell (None: no page sizes), or why its memory
    does not fit."""
    if inst.pagesize:
        return _select_pagesize(cell, inst)
    if cell.mempages:
        smallest = min(p.size_kb for p in cell.mempages)
        # Small pages may be overcommitted, except for pinned guests (legacy rule).
        if not _can_fit_pages(cell, smallest, inst.memory * 1024, use_free=pinned):
            pages = cell.pages(smallest)
            assert pages is not None
            avail = (pages.free_kb if pinned else pages.total_kb) // 1024
            return _CellMiss(
                "numa:memory",
                f"host cell {cell.id}: {inst.memory} MiB needed, {avail} MiB "
                f"{'free' if pinned else 'total'} in {smallest} KiB pages",
            )
    elif pinned:
        if cell.avail_memory < inst.memory:
            return _CellMiss(
                "numa:memory",
                f"host cell {cell.id}: {inst.memory} MiB needed, {cell.avail_memory} MiB free "
                "(no overcommit for pinned guests)",
            )
    elif cell.memory < inst.memory:
        return _CellMiss(
            "numa:memory",
            f"host cell {cell.id}: {inst.memory} MiB needed, cell has {cell.memory} MiB",
        )
    return inst.pagesize


def _cpu_count_miss(
    cell: HostNUMACell, inst: InstanceNUMACell, pinned: bool, reserved: int
) -> _CellMiss | None:
    """The cell has fewer CPUs of a kind than the guest cell asks for, used or not."""
    if pinned and len(inst.pcpuset) + reserved > len(cell.pcpuset):
        return _CellMiss(
            "numa:no-pinned-cpus",
            f"host cell {cell.id}: {len(inst.pcpuset)} dedicated CPU(s)"
            f"{' + 1 emulator CPU' if reserved else ''} needed, cell has "
            f"{len(cell.pcpuset)} dedicated CPU(s)",
        )
    if not pinned or inst.cpu_policy == CPU_MIXED:
        if len(inst.cpuset) > len(cell.cpuset):
            return _CellMiss(
                "numa:cpus",
                f"host cell {cell.id}: {len(inst.cpuset)} shared CPU(s) needed, cell has "
                f"{len(cell.cpuset)}",
            )
    return None


def _pin_cell(
    cell: HostNUMACell, inst: InstanceNUMACell, reserved: int
) -> tuple[dict[int, int], frozenset[int] | None] | _CellMiss:
    """Enough free dedicated CPUs, then the pinning (and emulator CPUs) on them."""
    need = len(inst.pcpuset) + reserved
    if need > cell.avail_pcpus:
        return _CellMiss(
            "numa:no-pinned-cpus",
            f"host cell {cell.id}: {need} free dedicated CPU(s) needed, "
            f"{cell.avail_pcpus} free of {len(cell.pcpuset)}",
        )
    return _pack_onto_cores(cell, inst, reserved)


def _limits_miss(
    cell: HostNUMACell, inst: InstanceNUMACell, limits: NUMATopologyLimits
) -> _CellMiss | None:
    """The shared CPUs or memory would pass the cell's allocation-ratio limits."""
    cpu_usage = cell.cpu_usage + len(inst.cpuset)
    cpu_limit = len(cell.cpuset) * limits.cpu_allocation_ratio
    if cpu_usage > cpu_limit:
        return _CellMiss(
            "numa:cpu-limit",
            f"host cell {cell.id}: shared CPU usage would be {cpu_usage}, limit "
            f"{cpu_limit:g} ({len(cell.cpuset)} x cpu_allocation_ratio "
            f"{limits.cpu_allocation_ratio:g})",
        )
    ram_usage = cell.memory_usage + inst.memory
    ram_limit = cell.memory * limits.ram_allocation_ratio
    if ram_usage > ram_limit:
        return _CellMiss(
            "numa:ram-limit",
            f"host cell {cell.id}: memory usage would be {ram_usage} MiB, limit "
            f"{ram_limit:g} MiB ({cell.memory} x ram_allocation_ratio "
            f"{limits.ram_allocation_ratio:g})",
        )
    return None


def _network_miss(
    host: HostNUMATopology, chosen: Sequence[HostNUMACell], meta: NetworkMetadata
) -> _CellMiss | None:
    """nova's network NUMA affinity: physnets / tunnels with affinity must be on chosen cells."""
    if meta.physnets:
        left = set(meta.physnets)
        for c in chosen:
            left -= c.network_metadata_physnets
        chosen_ids = {c.id for c in chosen}
        for c in host.cells:
            outside = left & c.network_metadata_physnets
            if outside:
                return _CellMiss(
                    "numa:network-affinity",
                    f"physnet(s) {sorted(outside)} are affined to host cell {c.id}, not to the "
                    f"chosen cell(s) {sorted(chosen_ids)}",
                )
    if meta.tunneled:
        if any(c.network_metadata_tunneled for c in chosen):
            return None
        for c in host.cells:
            if c.network_metadata_tunneled:
                return _CellMiss(
                    "numa:network-affinity",
                    f"tunneled networks are affined to host cell {c.id}, not to the chosen "
                    f"cell(s) {sorted(x.id for x in chosen)}",
                )
    return None


def _order_host_cells(
    host: HostNUMATopology,
    instance: InstanceNUMATopology,
    pci_requests: Sequence[InstancePCIRequest],
    pci_pools: Sequence[PciDevicePool],
    pack: bool,
) -> Sequence[HostNUMACell]:
    cells: Sequence[HostNUMACell] = host.cells
    if len(cells) <= len(instance.cells):
        return cells
    cells = sorted(cells, key=lambda c: c.avail_memory, reverse=not pack)
    if instance.cells[0].cpu_policy in (None, CPU_SHARED):
        cells = sorted(cells, key=lambda c: c.cpu_usage, reverse=pack)
    else:
        cells = sorted(cells, key=lambda c: c.avail_pcpus, reverse=not pack)
    per_node = total_pci_by_node(pci_pools)
    # Guests with PCI devices go to cells with devices first; others keep those cells free.
    cells = sorted(cells, key=lambda c: per_node.get(c.id, 0), reverse=bool(pci_requests))
    return cells


def numa_fit_instance_to_host(
    host: HostNUMATopology,
    instance: InstanceNUMATopology,
    *,
    limits: NUMATopologyLimits | None = None,
    pci_requests: Sequence[InstancePCIRequest] = (),
    pci_pools: Sequence[PciDevicePool] = (),
    provider_mapping: Mapping[str, Sequence[str]] | None = None,
    pack: bool = False,
) -> FitResult:
    """Fit ``instance`` onto ``host``: the fitted topology, or None with a reason.

    ``provider_mapping`` is the allocation candidate's ``mappings`` (PCI in Placement); None
    means the PCI requests carry their own ``rp_uuids`` (or PCI is not in Placement).
    ``pack`` is nova's ``[compute] packing_host_numa_cells_allocation_strategy``.
    """
    unfit = _topology_miss(host, instance)
    if unfit is not None:
        return unfit
    instance = _migrate_legacy_dedicated(instance)
    isolate_emu = instance.emulator_threads_policy == EMULATOR_ISOLATE
    network = _affined_networks(limits)
    cells = _order_host_cells(host, instance, pci_requests, pci_pools, pack)

    # Memo per (host cell, guest cell, emulator CPU reserved here): nova's fit/not-fit caches.
    memo: dict[tuple[int, int, int], InstanceNUMACell | _CellMiss] = {}
    misses: list[_CellMiss] = []

    def fit(cell: HostNUMACell, idx: int, reserved: int) -> InstanceNUMACell | _CellMiss:
        key = (cell.id, idx, reserved)
        got = memo.get(key)
        if got is None:
            got = fit_instance_cell(cell, instance.cells[idx], limits, reserved)
            memo[key] = got
            if isinstance(got, _CellMiss):
                misses.append(got)
        return got

    for perm in itertools.permutations(cells, len(instance.cells)):
        chosen: list[InstanceNUMACell] = []
        for idx, cell in enumerate(perm):
            got = fit(cell, idx, 1 if (isolate_emu and idx == 0) else 0)
            if isinstance(got, _CellMiss):
                break
            chosen.append(got)
        else:
            miss = _assignment_miss(
                host, perm, chosen, network, pci_requests, pci_pools, provider_mapping
            )
            if miss is not None:
                misses.append(miss)
                continue
            return FitResult(
                InstanceNUMATopology(
                    cells=tuple(chosen),
                    instance_uuid=instance.instance_uuid,
                    emulator_threads_policy=instance.emulator_threads_policy,
                )
            )

    return _summarise(misses)


def _topology_miss(host: HostNUMATopology, instance: InstanceNUMATopology) -> FitResult | None:
    """No fit whatever the cells hold: a topology missing, or too few host cells."""
    if not instance.cells:
        return FitResult(None, "numa:no-guest-topology", "the guest NUMA topology has no cells")
    if not host.cells:
        return FitResult(None, "numa:host-no-topology", "the host reports no NUMA topology")
    if len(host.cells) < len(instance.cells):
        return FitResult(
            None,
            "numa:too-few-cells",
            f"the guest asks for {len(instance.cells)} NUMA nodes, the host has {len(host.cells)}",
        )
    return None


def _affined_networks(limits: NUMATopologyLimits | None) -> NetworkMetadata | None:
    """The network metadata to check for NUMA affinity, None if it asks for none."""
    network = limits.network_metadata if limits is not None else None
    if network is not None and not network.physnets and not network.tunneled:
        return None
    return network


def _assignment_miss(
    host: HostNUMATopology,
    perm: Sequence[HostNUMACell],
    chosen: Sequence[InstanceNUMACell],
    network: NetworkMetadata | None,
    pci_requests: Sequence[InstancePCIRequest],
    pci_pools: Sequence[PciDevicePool],
    provider_mapping: Mapping[str, Sequence[str]] | None,
) -> _CellMiss | None:
    """Every guest cell fits its host cell: do the PCI requests and the networks fit too?"""
    if pci_requests:
        check = pci_check_requests(
            pci_pools,
            pci_requests,
            provider_mapping=provider_mapping,
            numa_cells=chosen,
            host_topology=host,
        )
        if not check.ok:
            assert check.code is not None
            return _CellMiss(check.code, f"host cell(s) {[c.id for c in perm]}: {check.detail}")
    if network is not None:
        return _network_miss(host, perm, network)
    return None


def _migrate_legacy_dedicated(instance: InstanceNUMATopology) -> InstanceNUMATopology:
    """Pre-Ussuri dedicated guest cells kept their pinned vCPUs in ``cpuset`` (nova migrates
    them the same way when it loads such an object)."""
    if not any(
        c.cpu_policy == CPU_DEDICATED and c.cpuset and not c.pcpuset for c in instance.cells
    ):
        return instance
    cells = tuple(
        replace(c, cpuset=frozenset(), pcpuset=c.cpuset)
        if c.cpu_policy == CPU_DEDICATED and c.cpuset and not c.pcpuset
        else c
        for c in instance.cells
    )
    return replace(instance, cells=cells)


def _summarise(misses: list[_CellMiss]) -> FitResult:
    if not misses:
        return FitResult(None, "numa:no-fit", "no assignment of guest cells to host cells fits")
    best = max(misses, key=lambda m: m.stage)  # max() keeps the first of equal stages
    seen: dict[str, None] = {}
    for m in misses:
        seen.setdefault(m.detail, None)
    return FitResult(None, best.code, "; ".join(seen))
