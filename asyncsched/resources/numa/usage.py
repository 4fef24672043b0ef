"""Host NUMA usage bookkeeping: nova's numa_usage_from_instance_numa on immutable values."""

from __future__ import annotations

import logging
from dataclasses import replace

from asyncsched.objects.host_resources import HostNUMACell, HostNUMATopology, NUMAPagesTopology
from asyncsched.objects.models import InstanceNUMACell, InstanceNUMATopology

LOG = logging.getLogger(__name__)

_PINNED = ("dedicated", "mixed")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _pages_after(
    cell: HostNUMACell, inst: InstanceNUMACell, sign: int
) -> tuple[NUMAPagesTopology, ...]:
    if not cell.mempages:
        return cell.mempages
    size = inst.pagesize if inst.pagesize and inst.pagesize > 0 else None
    if size is None:
        size = min(p.size_kb for p in cell.mempages)
    out = []
    for p in cell.mempages:
        if p.size_kb == size:
            delta = _ceil_div(inst.memory * 1024, p.size_kb)
            p = NUMAPagesTopology(
                size_kb=p.size_kb,
                total=p.total,
                used=max(0, p.used + sign * delta),
                reserved=p.reserved,
            )
        out.append(p)
    return tuple(out)


def _with_siblings(cell: HostNUMACell, cpus: frozenset[int]) -> frozenset[int]:
    out = set(cpus)
    for s in cell.siblings:
        if s & cpus:
            out |= s
    return frozenset(out)


def numa_usage_from_instance(
    host: HostNUMATopology, fitted: InstanceNUMATopology, *, free: bool = False
) -> HostNUMATopology:
    """The host topology after adding (or, with ``free``, removing) a fitted guest's usage.

    Memory, shared CPU usage and pages of the backing size change on each host cell a guest
    cell landed on; pinned guests also pin (unpin) their CPUs and emulator CPUs, with whole
    cores for the isolate thread policy. Inconsistent pinning (already pinned / unknown CPUs,
    which nova raises on) is logged and clamped instead: the cache must never wedge.
    """
    if not host.cells or not fitted.cells:
        return host
    sign = -1 if free else 1
    cells = []
    for cell in host.cells:
        mine = [ic for ic in fitted.cells if ic.id == cell.id]
        if not mine:
            cells.append(cell)
            continue
        memory_usage = cell.memory_usage
        cpu_usage = cell.cpu_usage
        pinned = set(cell.pinned_cpus)
        new = cell
        for ic in mine:
            new = replace(new, mempages=_pages_after(new, ic, sign))
            memory_usage += sign * ic.memory
            cpu_usage += sign * len(ic.cpuset)
            if ic.cpu_policy not in _PINNED:
                continue
            cpus = frozenset(ic.cpu_pinning.values()) if ic.cpu_pinning else frozenset()
            if ic.cpuset_reserved:
                cpus |= ic.cpuset_reserved
            if ic.cpu_thread_policy == "isolate":
                cpus = _with_siblings(cell, cpus)
            unknown = cpus - cell.pcpuset
            if unknown:
                LOG.warning(
                    "host cell %s: CPUs %s are not dedicated CPUs; ignoring them",
                    cell.id,
                    sorted(unknown),
                )
                cpus -= unknown
            if free:
                if cpus - pinned:
                    LOG.warning(
                        "host cell %s: unpinning CPUs %s that were not pinned",
                        cell.id,
                        sorted(cpus - pinned),
                    )
                pinned -= cpus
            else:
                if cpus & pinned:
                    LOG.warning(
                        "host cell %s: CPUs %s were already pinned", cell.id, sorted(cpus & pinned)
                    )
                pinned |= cpus
        cells.append(
            replace(
                cell,
                cpu_usage=max(0, cpu_usage),
                memory_usage=max(0, memory_usage),
                pinned_cpus=frozenset(pinned),
                mempages=new.mempages,
            )
        )
    return HostNUMATopology(cells=tuple(cells))
