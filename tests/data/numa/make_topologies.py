"""Regenerate the JSON host topologies in this directory (nova's own primitive formats).

Run: .venv/bin/python tests/data/numa/make_topologies.py
The JSON files are committed; tests only read them.
"""

from __future__ import annotations

import json
from pathlib import Path

from asyncsched.objects.host_resources import (
    HostNUMACell,
    HostNUMATopology,
    NUMAPagesTopology,
    PciDevicePool,
)
from tests.support.nova_objects import host_numa_topology_primitive, pci_pools_primitive

HERE = Path(__file__).parent
GIB_KB = 1024 * 1024


def _smt_cell(
    cid: int,
    cores: int,
    threads: int,
    first: int,
    stride: int,
    *,
    memory: int,
    pages: tuple[NUMAPagesTopology, ...],
    shared_cores: int = 0,
    socket: int | None = None,
    physnets: frozenset[str] = frozenset(),
    tunneled: bool = False,
) -> HostNUMACell:
    """``cores`` cores of ``threads`` threads: core i has CPUs first+i, first+i+stride, ..."""
    siblings = tuple(
        frozenset(first + i + t * stride for t in range(threads)) for i in range(cores)
    )
    shared = frozenset().union(*siblings[:shared_cores]) if shared_cores else frozenset()
    dedicated = frozenset().union(*siblings[shared_cores:])
    return HostNUMACell(
        id=cid,
        cpuset=shared,
        pcpuset=dedicated,
        memory=memory,
        siblings=siblings,
        mempages=pages,
        socket=socket,
        network_metadata_physnets=physnets,
        network_metadata_tunneled=tunneled,
    )


def _pages(memory_mb: int, huge2m: int = 0, huge1g: int = 0) -> tuple[NUMAPagesTopology, ...]:
    small = (memory_mb * 1024 - huge2m * 2048 - huge1g * GIB_KB) // 4
    out = [NUMAPagesTopology(size_kb=4, total=small)]
    if huge2m:
        out.append(NUMAPagesTopology(size_kb=2048, total=huge2m))
    if huge1g:
        out.append(NUMAPagesTopology(size_kb=GIB_KB, total=huge1g))
    return tuple(out)


def topologies() -> dict[str, HostNUMATopology]:
    return {
        # The seed's case: cell 0 has no 1 GiB pages at all, cell 1 has four.
        "seed_1g_one_cell.json": HostNUMATopology(
            cells=(
                _smt_cell(
                    0,
                    4,
                    2,
                    0,
                    8,
                    memory=16384,
                    pages=_pages(16384, huge2m=1024),
                    shared_cores=4,
                    socket=0,
                ),
                _smt_cell(
                    1,
                    4,
                    2,
                    4,
                    8,
                    memory=16384,
                    pages=_pages(16384, huge2m=1024, huge1g=4),
                    shared_cores=4,
                    socket=1,
                ),
            )
        ),
        # Two sockets, 4 cores x 2 threads each, every CPU dedicated; 4K + 2M pages.
        "smt_dedicated.json": HostNUMATopology(
            cells=(
                _smt_cell(0, 4, 2, 0, 8, memory=8192, pages=_pages(8192, huge2m=1024), socket=0),
                _smt_cell(1, 4, 2, 4, 8, memory=8192, pages=_pages(8192, huge2m=1024), socket=1),
            )
        ),
        # No SMT: one thread per core, every CPU dedicated.
        "nosmt_dedicated.json": HostNUMATopology(
            cells=(
                _smt_cell(0, 4, 1, 0, 0, memory=8192, pages=_pages(8192), socket=0),
                _smt_cell(1, 4, 1, 4, 0, memory=8192, pages=_pages(8192), socket=0),
            )
        ),
        # Shared CPUs only, no page info (old hypervisors); network affinity per cell.
        "shared_netaffinity.json": HostNUMATopology(
            cells=(
                HostNUMACell(
                    id=0,
                    cpuset=frozenset(range(4)),
                    memory=4096,
                    siblings=tuple(frozenset({c}) for c in range(4)),
                    network_metadata_physnets=frozenset({"physnet1"}),
                ),
                HostNUMACell(
                    id=1,
                    cpuset=frozenset(range(4, 8)),
                    memory=4096,
                    siblings=tuple(frozenset({c}) for c in range(4, 8)),
                    network_metadata_tunneled=True,
                ),
            )
        ),
        # Mixed: each cell has 2 shared cores and 2 dedicated cores (x2 threads).
        "mixed.json": HostNUMATopology(
            cells=(
                _smt_cell(0, 4, 2, 0, 8, memory=8192, pages=_pages(8192), shared_cores=2, socket=0),
                _smt_cell(1, 4, 2, 4, 8, memory=8192, pages=_pages(8192), shared_cores=2, socket=0),
            )
        ),
        # Four cells on two sockets (for the socket PCI policy and hw:numa_nodes splits).
        "four_cells_two_sockets.json": HostNUMATopology(
            cells=tuple(
                _smt_cell(
                    i,
                    2,
                    2,
                    2 * i,
                    8,
                    memory=4096,
                    pages=_pages(4096),
                    shared_cores=1,
                    socket=i // 2,
                )
                for i in range(4)
            )
        ),
        # Realistic two-socket host for the benchmark: 2 x 28 cores x 2 threads,
        # 4 shared cores per socket, 4K + 2M + 1G pages.
        "two_socket_28c.json": HostNUMATopology(
            cells=(
                _smt_cell(
                    0,
                    28,
                    2,
                    0,
                    56,
                    memory=196608,
                    pages=_pages(196608, huge2m=16384, huge1g=64),
                    shared_cores=4,
                    socket=0,
                ),
                _smt_cell(
                    1,
                    28,
                    2,
                    28,
                    56,
                    memory=196608,
                    pages=_pages(196608, huge2m=16384, huge1g=64),
                    shared_cores=4,
                    socket=1,
                ),
            )
        ),
    }


def pools() -> dict[str, tuple[PciDevicePool, ...]]:
    return {
        "pci_pools.json": (
            PciDevicePool(
                "8086", "1520", 0, 2, {"dev_type": "type-VF", "physical_network": "physnet1"}
            ),
            PciDevicePool(
                "8086", "1520", 1, 4, {"dev_type": "type-VF", "physical_network": "physnet1"}
            ),
            PciDevicePool(
                "8086", "1521", 1, 1, {"dev_type": "type-PF", "physical_network": "physnet1"}
            ),
            PciDevicePool("10de", "1db4", None, 1, {"dev_type": "type-PCI"}),
            PciDevicePool(
                "15b3",
                "101e",
                0,
                2,
                {"dev_type": "type-VF", "physical_network": "physnet2", "remote_managed": "true"},
            ),
        ),
        "pci_pools_placement.json": (
            PciDevicePool(
                "10de",
                "1eb8",
                0,
                2,
                {"dev_type": "type-PCI", "rp_uuid": "aaaaaaaa-0000-0000-0000-000000000000"},
            ),
            PciDevicePool(
                "10de",
                "1eb8",
                1,
                2,
                {"dev_type": "type-PCI", "rp_uuid": "bbbbbbbb-0000-0000-0000-000000000000"},
            ),
        ),
        "pci_pools_bench.json": (
            PciDevicePool(
                "8086", "154c", 0, 16, {"dev_type": "type-VF", "physical_network": "physnet1"}
            ),
            PciDevicePool(
                "8086", "154c", 1, 16, {"dev_type": "type-VF", "physical_network": "physnet2"}
            ),
            PciDevicePool("10de", "20b5", 1, 2, {"dev_type": "type-PCI"}),
        ),
    }


def main() -> None:
    for name, topo in topologies().items():
        (HERE / name).write_text(json.dumps(host_numa_topology_primitive(topo), indent=1) + "\n")
    for name, pl in pools().items():
        (HERE / name).write_text(json.dumps(pci_pools_primitive(pl), indent=1) + "\n")
    legacy = {
        "cells": [
            {"id": 0, "cpus": "0-3", "mem": {"total": 2048, "used": 512}, "cpu_usage": 1},
            {"id": 1, "cpus": "4-7,^6", "mem": {"total": 2048, "used": 0}, "cpu_usage": 0},
        ]
    }
    (HERE / "legacy_format.json").write_text(json.dumps(legacy, indent=1) + "\n")


if __name__ == "__main__":
    main()
