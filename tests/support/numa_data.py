"""Load the JSON host topologies of tests/data/numa and build requests for the tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from asyncsched.objects.host_resources import (
    HostNUMACell,
    HostNUMATopology,
    PciDevicePool,
    parse_host_numa_topology,
    parse_pci_pools,
)
from asyncsched.objects.models import InstanceNUMACell, InstanceNUMATopology, InstancePCIRequest

DATA = Path(__file__).resolve().parents[1] / "data" / "numa"
GIB_KB = 1024 * 1024


def host(name: str) -> HostNUMATopology:
    topo = parse_host_numa_topology((DATA / name).read_text())
    assert topo is not None
    return topo


def pools(name: str) -> tuple[PciDevicePool, ...]:
    return parse_pci_pools((DATA / name).read_text())


def with_cells(topo: HostNUMATopology, **per_cell: Mapping[str, object]) -> HostNUMATopology:
    """Copy of ``topo`` with some cells changed: ``with_cells(t, c1={"memory_usage": 9})``."""
    cells = []
    for c in topo.cells:
        changes = per_cell.get(f"c{c.id}")
        cells.append(replace(c, **changes) if changes else c)  # type: ignore[arg-type]
    return HostNUMATopology(cells=tuple(cells))


def full(cell: HostNUMACell) -> dict[str, object]:
    """Changes that leave a cell no shared CPU and no free memory or pages."""
    return {
        "cpuset": frozenset(),
        "memory_usage": cell.memory,
        "mempages": tuple(replace(p, used=p.total) for p in cell.mempages),
    }


def shared_cell(
    cpus: Sequence[int], memory: int, pagesize: int | None = None, cid: int = 0
) -> InstanceNUMACell:
    return InstanceNUMACell(id=cid, cpuset=frozenset(cpus), memory=memory, pagesize=pagesize)


def dedicated_cell(
    cpus: Sequence[int],
    memory: int,
    thread: str | None = None,
    cid: int = 0,
    pagesize: int | None = None,
) -> InstanceNUMACell:
    return InstanceNUMACell(
        id=cid,
        pcpuset=frozenset(cpus),
        memory=memory,
        cpu_policy="dedicated",
        cpu_thread_policy=thread,
        pagesize=pagesize,
    )


def guest(*cells: InstanceNUMACell, emulator: str | None = None) -> InstanceNUMATopology:
    return InstanceNUMATopology(cells=tuple(cells), emulator_threads_policy=emulator)


def pci_request(
    vendor: str,
    product: str,
    count: int = 1,
    *,
    policy: str | None = None,
    alias: str | None = "a1",
    request_id: str = "req-1",
    **tags: str,
) -> InstancePCIRequest:
    spec = {"vendor_id": vendor, "product_id": product, **tags}
    return InstancePCIRequest(
        count=count, spec=(spec,), alias_name=alias, request_id=request_id, numa_policy=policy
    )
