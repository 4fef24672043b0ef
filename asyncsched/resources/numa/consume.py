"""Apply a chosen host's NUMA and PCI consumption to its cached HostState.

Called by the scheduler core right after a host is chosen for one instance, so the next
instance of a multi-create (and concurrent requests) see the pinned CPUs, memory, pages and PCI
devices as used. nova does the same in HostState.consume_from_request.

``place_numa_pci`` also returns what was placed (``PlacedNumaPci``) so the host-state cache can
re-apply it over fresh DB values on every refresh and take it out again on release.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from asyncsched.objects.host_resources import HostNUMACell, HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    InstanceNUMATopology,
    InstancePCIRequest,
    NUMATopologyLimits,
    RequestSpec,
)
from asyncsched.resources.numa.fit import numa_fit_instance_to_host
from asyncsched.resources.numa.placed import NumaPciHost, PlacedNumaPci
from asyncsched.resources.numa.usage import numa_usage_from_instance
from asyncsched.resources.pci.stats import PciRequestFailed, pci_apply_requests

LOG = logging.getLogger(__name__)


def consume_numa_pci(
    host: NumaPciHost,
    spec: RequestSpec,
    *,
    limits: NUMATopologyLimits | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
    pack: bool = False,
) -> tuple[HostNUMATopology | None, tuple[PciDevicePool, ...] | None, InstanceNUMATopology | None]:
    """Fit once more on the live state and record the usage on ``host``.

    The caller must hold ``host.lock``. Returns ``(new host topology, new PCI pools, fitted
    guest topology)``: each None when not applicable (no NUMA / PCI request, or it no longer
    fits because the state moved on; that is logged, never raised, and the host state is left
    as it was for that part). ``provider_mapping`` is the claimed candidate's ``mappings``.
    The fitted guest topology carries the pinning (nova stores it back into the RequestSpec).
    """
    placed = place_numa_pci(host, spec, limits=limits, provider_mapping=provider_mapping, pack=pack)
    if placed is None:
        return None, None, None
    return placed.numa_after, placed.pci_after, placed.fitted


def place_numa_pci(
    host: NumaPciHost,
    spec: RequestSpec,
    *,
    limits: NUMATopologyLimits | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
    pack: bool = False,
) -> PlacedNumaPci | None:
    """``consume_numa_pci``, returning what was placed for the cache's assumption.

    The caller must hold ``host.lock``; ``host.numa_topology``/``pci_pools`` are updated as
    by ``consume_numa_pci``. None when nothing NUMA/PCI was placed (no such request, it no
    longer fits, or a bug, which is logged: the claim already succeeded in Placement).
    Pass the result to ``HostStateCache.consume_locked(..., placed=...)``. ``pack`` is
    ``[compute] packing_host_numa_cells_allocation_strategy``, as for the filter's fit.
    """
    try:
        placed = _consume(host, spec, limits=limits, provider_mapping=provider_mapping, pack=pack)
    except Exception:  # the claim already succeeded in Placement: never lose the request
        LOG.exception(
            "recording NUMA/PCI usage of instance %s on %s failed",
            spec.instance_uuid,
            host.nodename,
        )
        return None
    return None if placed.empty else placed


def _consume(
    host: NumaPciHost,
    spec: RequestSpec,
    *,
    limits: NUMATopologyLimits | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
    pack: bool,
) -> PlacedNumaPci:
    requests = tuple(spec.pci_requests.requests) if spec.pci_requests is not None else ()
    host_topo = host.numa_topology
    pools_before = host.pci_pools
    fitted = _refit_numa(host, spec, requests, limits, provider_mapping, pack)
    new_topo = (
        numa_usage_from_instance(host_topo, fitted)
        if host_topo is not None and fitted is not None
        else None
    )
    new_pools = _reapply_pci(host, spec, requests, fitted, provider_mapping)

    # Both parts computed before either is stored: a failure above leaves the host untouched.
    if new_topo is not None:
        host.numa_topology = new_topo
    if new_pools is not None:
        host.pci_pools = new_pools
    if new_topo is not None or new_pools is not None:
        host.touch()
    return PlacedNumaPci(
        fitted=fitted,
        pci_requests=requests if new_pools is not None else (),
        provider_mapping=(
            {k: tuple(v) for k, v in provider_mapping.items()}
            if provider_mapping is not None
            else None
        ),
        requested=spec.numa_topology,
        limits=limits,
        pack=pack,
        numa_before=host_topo,
        pci_before=pools_before,
        numa_after=new_topo,
        pci_after=new_pools,
    )


def _refit_numa(
    host: NumaPciHost,
    spec: RequestSpec,
    requests: tuple[InstancePCIRequest, ...],
    limits: NUMATopologyLimits | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
    pack: bool,
) -> InstanceNUMATopology | None:
    """The guest's NUMA topology fitted on the host as it is now; None (logged) if it no
    longer fits, or if the guest or the host has no topology."""
    host_topo = host.numa_topology
    if host_topo is None or spec.numa_topology is None or not spec.numa_topology.cells:
        return None
    result = numa_fit_instance_to_host(
        host_topo,
        spec.numa_topology,
        limits=limits,
        pci_requests=requests,
        pci_pools=host.pci_pools,
        provider_mapping=provider_mapping,
        pack=pack,
    )
    if result.fitted is None:
        LOG.warning(
            "instance %s no longer fits the NUMA topology of %s (%s): %s",
            spec.instance_uuid,
            host.nodename,
            result.code,
            result.detail,
        )
    return result.fitted


def _reapply_pci(
    host: NumaPciHost,
    spec: RequestSpec,
    requests: tuple[InstancePCIRequest, ...],
    fitted: InstanceNUMATopology | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
) -> tuple[PciDevicePool, ...] | None:
    """The host's PCI pools after the guest's requests; None (logged) if they no longer fit,
    or if there is nothing to take."""
    if not requests or not host.pci_pools:
        return None
    try:
        return pci_apply_requests(
            host.pci_pools,
            requests,
            provider_mapping=provider_mapping,
            numa_cells=fitted.cells if fitted is not None else None,
            host_topology=host.numa_topology,
        )
    except PciRequestFailed as exc:
        LOG.warning(
            "PCI requests of instance %s no longer fit %s (%s): %s",
            spec.instance_uuid,
            host.nodename,
            exc.check.code,
            exc.check.detail,
        )
        return None


_PINNED = ("dedicated", "mixed")


@dataclass(frozen=True, slots=True)
class Reapplied:
    """The host values after re-applying one ``PlacedNumaPci`` (see ``reapply_placed``)."""

    numa_topology: HostNUMATopology | None
    pci_pools: tuple[PciDevicePool, ...]
    fitted: InstanceNUMATopology | None  # the placement now counted (a new one if refitted)
    conflict: str | None = None  # why (part of) it is not counted; None: all of it is
    refitted: bool = False  # the old pinning no longer fit and the request was fitted again


def _free_small_mib(cell: HostNUMACell) -> int:
    if not cell.mempages:
        return cell.avail_memory
    smallest = min(cell.mempages, key=lambda p: p.size_kb)
    return smallest.free * smallest.size_kb // 1024


def numa_usage_conflict(
    host: HostNUMATopology,
    fitted: InstanceNUMATopology,
    limits: NUMATopologyLimits | None = None,
) -> str | None:
    """Why ``fitted`` cannot be added to ``host`` as it is, or None.

    A pinned CPU that is not a dedicated CPU of its cell or is pinned already, a host cell
    that is gone, too few free pages of an explicit page size, memory a pinned guest would
    overcommit, or (with the ``limits`` it was fitted under) shared CPUs or memory past the
    overcommit limits nova's fit enforces: fresh usage from the database can leave no room
    where there was some, and then the guest is fitted afresh like a taken pinning.
    """
    cells = {c.id: c for c in host.cells}
    for ic in fitted.cells:
        cell = cells.get(ic.id)
        if cell is None:
            return f"host NUMA cell {ic.id} is gone"
        if ic.cpu_policy in _PINNED and not (ic.pagesize and ic.pagesize > 0):
            # pinned guests never overcommit memory (nova's fit: the free small pages, or
            # the available memory of a cell that reports no pages)
            free = _free_small_mib(cell)
            if free < ic.memory:
                return f"cell {cell.id} has {free} MiB free for a pinned guest, {ic.memory} needed"
        if limits is not None and ic.cpu_policy != "dedicated":
            ram_limit = cell.memory * limits.ram_allocation_ratio
            if cell.memory_usage + ic.memory > ram_limit:
                return (
                    f"cell {cell.id} memory usage would be {cell.memory_usage + ic.memory} "
                    f"MiB, limit {ram_limit:g} MiB"
                )
            cpu_limit = len(cell.cpuset) * limits.cpu_allocation_ratio
            if cell.cpu_usage + len(ic.cpuset) > cpu_limit:
                return (
                    f"cell {cell.id} shared CPU usage would be "
                    f"{cell.cpu_usage + len(ic.cpuset)}, limit {cpu_limit:g}"
                )
        if ic.cpu_policy in _PINNED:
            cpus = frozenset(ic.cpu_pinning.values()) if ic.cpu_pinning else frozenset()
            if ic.cpuset_reserved:
                cpus |= ic.cpuset_reserved
            if ic.cpu_thread_policy == "isolate":
                cpus = cpus.union(*(s for s in cell.siblings if s & cpus))
            if cpus - cell.pcpuset:
                return f"CPUs {sorted(cpus - cell.pcpuset)} of cell {cell.id} are not dedicated"
            if cpus & cell.pinned_cpus:
                return f"CPUs {sorted(cpus & cell.pinned_cpus)} of cell {cell.id} are pinned"
        if ic.pagesize and ic.pagesize > 0 and cell.mempages:
            pages = cell.pages(ic.pagesize)
            need = -(-ic.memory * 1024 // ic.pagesize)
            if pages is None or pages.free < need:
                have = 0 if pages is None else pages.free
                return f"cell {cell.id} has {have} free {ic.pagesize} KiB pages, {need} needed"
    return None


def reapply_placed(
    placed: PlacedNumaPci,
    topo: HostNUMATopology | None,
    pools: tuple[PciDevicePool, ...],
) -> Reapplied:
    """``placed`` added to the host values ``topo``/``pools`` (fresh DB values plus the
    pending consumption before it). Never raises.

    The recorded pinning is re-used when it still fits; otherwise the original request is
    fitted again (``refitted``); if that fails too, the NUMA part is left out and ``conflict``
    says why, so the result stays consistent (no CPU pinned twice, no pages beyond the total).
    PCI requests are applied on the NUMA cells actually counted; if the pools can no longer
    satisfy them the PCI part is left out the same way.
    """
    try:
        return _reapply(placed, topo, pools)
    except Exception as exc:  # a bug must not wedge the cache's refresh
        LOG.exception("re-applying pending NUMA/PCI usage failed")
        return Reapplied(topo, pools, placed.fitted, conflict=f"internal error: {exc!r}")


def _reapply(
    placed: PlacedNumaPci,
    topo: HostNUMATopology | None,
    pools: tuple[PciDevicePool, ...],
) -> Reapplied:
    fitted = placed.fitted
    counted: InstanceNUMATopology | None = None
    problems: list[str] = []
    refitted = False
    before = topo
    new_topo = topo
    if fitted is not None:
        why = "the host reports no NUMA topology" if topo is None else None
        if topo is not None:
            why = numa_usage_conflict(topo, fitted, placed.limits)
            req = placed.requested
            if why is not None and req is not None and req.cells:
                result = numa_fit_instance_to_host(
                    topo,
                    req,
                    limits=placed.limits,
                    pci_requests=placed.pci_requests,
                    pci_pools=pools,
                    provider_mapping=placed.provider_mapping,
                    pack=placed.pack,
                )
                if result.fitted is not None:
                    fitted, why, refitted = result.fitted, None, True
                else:
                    why = f"{why}; refit: {result.code}"
            if why is None:
                counted = fitted
                new_topo = numa_usage_from_instance(topo, fitted)
        if why is not None:
            problems.append(f"NUMA: {why}")
    new_pools = pools
    if placed.pci_requests:
        try:
            new_pools = pci_apply_requests(
                pools,
                placed.pci_requests,
                provider_mapping=placed.provider_mapping,
                numa_cells=counted.cells if counted is not None else None,
                host_topology=before,
            )
        except PciRequestFailed as exc:
            problems.append(f"PCI: {exc.check.code}: {exc.check.detail}")
    return Reapplied(
        new_topo,
        new_pools,
        fitted,
        conflict="; ".join(problems) or None,
        refitted=refitted,
    )
