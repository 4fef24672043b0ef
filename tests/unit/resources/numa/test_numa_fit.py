"""Table-driven NUMA fit cases; expected outcomes follow nova's numa_fit_instance_to_host."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pytest

from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    InstanceNUMACell,
    InstanceNUMATopology,
    InstancePCIRequest,
    NetworkMetadata,
    NUMATopologyLimits,
)
from asyncsched.resources.numa import (
    MEMPAGES_ANY,
    MEMPAGES_LARGE,
    MEMPAGES_SMALL,
    numa_fit_instance_to_host,
)
from tests.support.numa_data import (
    GIB_KB,
    dedicated_cell,
    full,
    guest,
    host,
    pci_request,
    pools,
    shared_cell,
    with_cells,
)

SEED = host("seed_1g_one_cell.json")
SMT = host("smt_dedicated.json")
NOSMT = host("nosmt_dedicated.json")
SHARED = host("shared_netaffinity.json")
MIXED = host("mixed.json")
FOUR = host("four_cells_two_sockets.json")
PCI = pools("pci_pools.json")


def limits(cpu: float = 16.0, ram: float = 1.5, net: NetworkMetadata | None = None) -> Any:
    return NUMATopologyLimits(
        cpu_allocation_ratio=cpu, ram_allocation_ratio=ram, network_metadata=net
    )


@dataclass(frozen=True)
class Case:
    id: str
    host: HostNUMATopology
    guest: InstanceNUMATopology
    cells: tuple[int, ...] | None  # host cell ids chosen, None: does not fit
    code: str | None = None  # reason code when it does not fit
    limits: NUMATopologyLimits | None = None
    pci: tuple[InstancePCIRequest, ...] = ()
    pools: tuple[PciDevicePool, ...] = ()
    pagesizes: tuple[int | None, ...] | None = None  # selected page size per guest cell
    pinning: tuple[dict[int, int], ...] | None = None
    reserved: frozenset[int] | None = None  # cpuset_reserved of guest cell 0


CASES = [
    # --- the seed's case: 1 GiB pages, one host cell lacks that page size ------------------
    Case(
        "seed-1g-other-cell",
        SEED,
        guest(shared_cell([0, 1], 2048, GIB_KB)),
        (1,),
        pagesizes=(GIB_KB,),
    ),
    Case(
        "seed-1g-no-cell-offers",
        SMT,
        guest(dedicated_cell([0, 1], 2048, pagesize=GIB_KB)),
        None,
        code=f"numa:pagesize-{GIB_KB}-unavailable",
    ),
    Case(
        "seed-1g-too-few-pages",
        SEED,
        guest(shared_cell([0], 5120, GIB_KB)),
        None,
        code="numa:pages-insufficient",
    ),
    Case(
        "1g-reserved-pages-count",
        with_cells(
            SEED,
            c1={
                "mempages": tuple(
                    replace(p, reserved=3) if p.size_kb == GIB_KB else p
                    for p in SEED.cells[1].mempages
                )
            },
        ),
        guest(shared_cell([0], 2048, GIB_KB)),
        None,
        code="numa:pages-insufficient",
    ),
    Case(
        "1g-used-pages-count",
        with_cells(
            SEED,
            c1={
                "mempages": tuple(
                    replace(p, used=2) if p.size_kb == GIB_KB else p for p in SEED.cells[1].mempages
                )
            },
        ),
        guest(shared_cell([0], 2048, GIB_KB)),
        (1,),
        pagesizes=(GIB_KB,),
    ),
    # --- page size keywords ------------------------------------------------------------------
    Case("small", SEED, guest(shared_cell([0], 1024, MEMPAGES_SMALL)), (0,), pagesizes=(4,)),
    Case("large-2m", SEED, guest(shared_cell([0], 1024, MEMPAGES_LARGE)), (0,), pagesizes=(2048,)),
    Case(
        "large-falls-to-1g-cell",
        SEED,
        guest(shared_cell([0], 3072, MEMPAGES_LARGE)),
        (1,),
        pagesizes=(GIB_KB,),
    ),
    Case(
        "large-none-offered",
        NOSMT,
        guest(dedicated_cell([0], 1024, pagesize=MEMPAGES_LARGE)),
        None,
        code="numa:pagesize-large-unavailable",
    ),
    Case(
        "any-prefers-largest",
        SEED,
        guest(shared_cell([0], 1024, MEMPAGES_ANY)),
        (0,),
        pagesizes=(2048,),
    ),
    Case("explicit-2m", SEED, guest(shared_cell([0], 1024, 2048)), (0,), pagesizes=(2048,)),
    Case(
        "explicit-not-page-multiple",
        SEED,
        guest(shared_cell([0], 1025, 2048)),
        None,
        code="numa:pages-insufficient",
    ),
    Case(
        "explicit-unknown-size",
        SEED,
        guest(shared_cell([0], 1024, 16)),
        None,
        code="numa:pagesize-16-unavailable",
    ),
    # --- memory without a page size ----------------------------------------------------------
    Case(
        "small-pages-total-too-small",
        SEED,
        guest(shared_cell([0], 15000)),
        None,
        code="numa:memory",
    ),
    Case(
        "small-pages-shared-overcommit-ok",
        with_cells(SEED, c0={"memory_usage": 16000}, c1={"memory_usage": 16000}),
        guest(shared_cell([0], 12000)),
        (0,),
        pagesizes=(None,),
    ),
    Case("no-pages-fits", SHARED, guest(shared_cell([0], 4096)), (0,)),
    Case("no-pages-too-big", SHARED, guest(shared_cell([0], 4097)), None, code="numa:memory"),
    # --- limits: cpu_allocation_ratio / ram_allocation_ratio for shared CPUs ----------------
    Case(
        "cpu-limit",
        with_cells(SHARED, c0={"cpu_usage": 14}, c1={"cpu_usage": 14}),
        guest(shared_cell([0, 1, 2], 512)),
        None,
        code="numa:cpu-limit",
        limits=limits(4.0),
    ),
    Case(
        "cpu-limit-higher-ratio",
        with_cells(SHARED, c0={"cpu_usage": 14}, c1={"cpu_usage": 14}),
        guest(shared_cell([0, 1, 2], 512)),
        (0,),
        limits=limits(5.0),
    ),
    Case(
        "cpu-usage-without-limits",
        with_cells(SHARED, c0={"cpu_usage": 99}),
        guest(shared_cell([0, 1, 2], 512)),
        (1,),
    ),
    Case(
        "ram-limit",
        with_cells(SHARED, c0={"memory_usage": 3500}, c1={"memory_usage": 3500}),
        guest(shared_cell([0], 1024)),
        None,
        code="numa:ram-limit",
        limits=limits(ram=1.0),
    ),
    Case(
        "ram-limit-overcommit",
        with_cells(SHARED, c0={"memory_usage": 3500}, c1={"memory_usage": 3500}),
        guest(shared_cell([0], 1024)),
        (0,),
        limits=limits(ram=1.5),
    ),
    Case("too-many-shared-cpus", SHARED, guest(shared_cell(range(5), 512)), None, code="numa:cpus"),
    # --- dedicated pinning and thread policies -----------------------------------------------
    Case(
        "pin-prefer-siblings",
        SMT,
        guest(dedicated_cell(range(4), 1024)),
        (0,),
        pinning=({0: 0, 1: 8, 2: 1, 3: 9},),
    ),
    Case(
        "pin-require-siblings",
        SMT,
        guest(dedicated_cell(range(4), 1024, "require")),
        (0,),
        pinning=({0: 0, 1: 8, 2: 1, 3: 9},),
    ),
    Case(
        "pin-require-no-smt",
        NOSMT,
        guest(dedicated_cell(range(2), 1024, "require")),
        None,
        code="numa:thread-policy",
    ),
    Case(
        "pin-isolate-no-smt",
        NOSMT,
        guest(dedicated_cell(range(2), 1024, "isolate")),
        (0,),
        pinning=({0: 0, 1: 1},),
    ),
    Case(
        "pin-isolate-smt-host",
        SMT,
        guest(dedicated_cell(range(2), 1024, "isolate")),
        None,
        code="numa:thread-policy",
    ),
    Case(
        "pin-prefer-fallback-split-cores",
        with_cells(
            SMT,
            c0={"pinned_cpus": frozenset({0, 9, 2, 11})},
            c1={"pinned_cpus": frozenset(range(4, 8)) | frozenset(range(12, 16))},
        ),
        guest(dedicated_cell(range(4), 1024)),
        (0,),
        pinning=({0: 8, 1: 1, 2: 10, 3: 3},),
    ),
    Case(
        "pin-require-split-cores",
        with_cells(
            SMT,
            c0={"pinned_cpus": frozenset({0, 9, 2, 11})},
            c1={"pinned_cpus": frozenset(range(4, 8)) | frozenset(range(12, 16))},
        ),
        guest(dedicated_cell(range(4), 1024, "require")),
        None,
        code="numa:thread-policy",
    ),
    Case(
        "pin-not-enough-free",
        with_cells(
            SMT,
            c0={"pinned_cpus": frozenset({0, 8, 1, 9, 2, 10})},
            c1={"pinned_cpus": frozenset({4, 12, 5, 13, 6, 14})},
        ),
        guest(dedicated_cell(range(4), 1024)),
        None,
        code="numa:no-pinned-cpus",
    ),
    Case(
        "pin-more-than-cell",
        SMT,
        guest(dedicated_cell(range(9), 1024)),
        None,
        code="numa:no-pinned-cpus",
    ),
    Case(
        "pin-on-shared-only-host",
        SHARED,
        guest(dedicated_cell(range(1), 512)),
        None,
        code="numa:no-pinned-cpus",
    ),
    Case(
        "pin-memory-no-overcommit",
        with_cells(
            SMT,
            c0={"mempages": tuple(replace(p, used=p.total - 100) for p in SMT.cells[0].mempages)},
            c1={"mempages": tuple(replace(p, used=p.total - 100) for p in SMT.cells[1].mempages)},
        ),
        guest(dedicated_cell(range(1), 1024)),
        None,
        code="numa:memory",
    ),
    # --- emulator threads --------------------------------------------------------------------
    Case(
        "emulator-isolate-reserves-one",
        SMT,
        guest(dedicated_cell(range(2), 1024), emulator="isolate"),
        (0,),
        pinning=({0: 0, 1: 8},),
        reserved=frozenset({1}),
    ),
    Case(
        "emulator-share-reserves-none",
        SMT,
        guest(dedicated_cell(range(2), 1024), emulator="share"),
        (0,),
        pinning=({0: 0, 1: 8},),
        reserved=None,
    ),
    Case(
        "emulator-isolate-no-room",
        SMT,
        guest(dedicated_cell(range(8), 1024), emulator="isolate"),
        None,
        code="numa:no-pinned-cpus",
    ),
    Case("emulator-isolate-no-room-without", SMT, guest(dedicated_cell(range(8), 1024)), (0,)),
    # --- mixed policy ------------------------------------------------------------------------
    Case(
        "mixed",
        MIXED,
        guest(
            InstanceNUMACell(
                id=0,
                cpuset=frozenset({0, 1}),
                pcpuset=frozenset({2, 3}),
                memory=2048,
                cpu_policy="mixed",
            )
        ),
        (0,),
        pinning=({2: 2, 3: 10},),
        limits=limits(),
    ),
    Case(
        "mixed-too-many-dedicated",
        MIXED,
        guest(
            InstanceNUMACell(
                id=0,
                cpuset=frozenset({0}),
                pcpuset=frozenset(range(1, 6)),
                memory=1024,
                cpu_policy="mixed",
            )
        ),
        None,
        code="numa:no-pinned-cpus",
    ),
    Case(
        "mixed-too-many-shared",
        MIXED,
        guest(
            InstanceNUMACell(
                id=0,
                cpuset=frozenset(range(5)),
                pcpuset=frozenset({5}),
                memory=1024,
                cpu_policy="mixed",
            )
        ),
        None,
        code="numa:cpus",
    ),
    # --- hw:numa_nodes splits ------------------------------------------------------------------
    Case(
        "two-guest-cells",
        FOUR,
        guest(shared_cell([0, 1], 2048, cid=0), shared_cell([2, 3], 2048, cid=1)),
        (0, 1),
    ),
    Case(
        "two-guest-cells-spread-by-free-memory",
        with_cells(FOUR, c0={"memory_usage": 3000}),
        guest(shared_cell([0], 1024, cid=0), shared_cell([1], 1024, cid=1)),
        (1, 2),
    ),
    Case(
        "two-guest-cells-asymmetric",
        FOUR,
        guest(shared_cell([0, 1], 1024, cid=0), shared_cell([2, 3, 4], 1024, cid=1)),
        None,
        code="numa:cpus",
    ),
    Case(
        "more-guest-cells-than-host",
        SHARED,
        guest(*(shared_cell([i], 256, cid=i) for i in range(3))),
        None,
        code="numa:too-few-cells",
    ),
    Case(
        "two-guest-cells-pinned",
        SMT,
        guest(dedicated_cell([0, 1], 1024, cid=0), dedicated_cell([2, 3], 1024, cid=1)),
        (0, 1),
        pinning=({0: 0, 1: 8}, {2: 4, 3: 12}),
    ),
    # --- network NUMA affinity ----------------------------------------------------------------
    Case(
        "physnet-affinity-beats-ordering",
        with_cells(SHARED, c0={"memory_usage": 2000}),
        guest(shared_cell([0], 512)),
        (0,),
        limits=limits(net=NetworkMetadata(physnets=frozenset({"physnet1"}))),
    ),
    Case(
        "tunnel-affinity",
        SHARED,
        guest(shared_cell([0], 512)),
        (1,),
        limits=limits(net=NetworkMetadata(tunneled=True)),
    ),
    Case(
        "physnet-and-tunnel-one-cell",
        SHARED,
        guest(shared_cell([0], 512)),
        None,
        code="numa:network-affinity",
        limits=limits(net=NetworkMetadata(physnets=frozenset({"physnet1"}), tunneled=True)),
    ),
    Case(
        "physnet-and-tunnel-two-cells",
        SHARED,
        guest(shared_cell([0], 512, cid=0), shared_cell([1], 512, cid=1)),
        (0, 1),
        limits=limits(net=NetworkMetadata(physnets=frozenset({"physnet1"}), tunneled=True)),
    ),
    Case(
        "physnet-without-affinity",
        with_cells(SHARED, c0={"memory_usage": 2000}),
        guest(shared_cell([0], 512)),
        (1,),
        limits=limits(net=NetworkMetadata(physnets=frozenset({"physnet9"}))),
    ),
    # --- PCI NUMA affinity policies -----------------------------------------------------------
    Case(
        "pci-cells-with-devices-first",
        SEED,
        guest(shared_cell([0], 512)),
        (1,),
        pci=(pci_request("8086", "1520", 1),),
        pools=PCI,
    ),
    Case(
        "pci-required-local",
        SEED,
        guest(shared_cell([0], 512)),
        (1,),
        pci=(pci_request("8086", "1520", 3, policy="required"),),
        pools=PCI,
    ),
    Case(
        "pci-required-wrong-node",
        with_cells(SEED, c1=full(SEED.cells[1])),
        guest(shared_cell([0], 512)),
        None,
        code="pci:wrong-numa-node",
        pci=(pci_request("8086", "1520", 3, policy="required"),),
        pools=PCI,
    ),
    Case(
        "pci-legacy-wrong-node",
        with_cells(SEED, c1=full(SEED.cells[1])),
        guest(shared_cell([0], 512)),
        None,
        code="pci:wrong-numa-node",
        pci=(pci_request("8086", "1520", 3),),
        pools=PCI,
    ),
    Case(
        "pci-preferred-remote-ok",
        with_cells(SEED, c1=full(SEED.cells[1])),
        guest(shared_cell([0], 512)),
        (0,),
        pci=(pci_request("8086", "1520", 3, policy="preferred"),),
        pools=PCI,
    ),
    Case(
        "pci-legacy-no-numa-info-ok",
        with_cells(SEED, c0=full(SEED.cells[0])),
        guest(shared_cell([0], 512)),
        (1,),
        pci=(pci_request("10de", "1db4", 1),),
        pools=PCI,
    ),
    Case(
        "pci-required-no-numa-info",
        SEED,
        guest(shared_cell([0], 512)),
        None,
        code="pci:wrong-numa-node",
        pci=(pci_request("10de", "1db4", 1, policy="required"),),
        pools=PCI,
    ),
    Case(
        "pci-socket-other-socket",
        with_cells(SEED, c1=full(SEED.cells[1])),
        guest(shared_cell([0], 512)),
        None,
        code="pci:wrong-socket",
        pci=(pci_request("8086", "1520", 3, policy="socket"),),
        pools=PCI,
    ),
    Case(
        "pci-socket-same-socket",
        with_cells(FOUR, c1=full(FOUR.cells[1]), c2=full(FOUR.cells[2]), c3=full(FOUR.cells[3])),
        guest(shared_cell([0], 512)),
        (0,),
        pci=(pci_request("8086", "1520", 3, policy="socket"),),
        pools=(PciDevicePool("8086", "1520", 1, 3, {"dev_type": "type-VF"}),),
    ),
    Case(
        "pci-required-same-socket-other-node",
        with_cells(FOUR, c1=full(FOUR.cells[1]), c2=full(FOUR.cells[2]), c3=full(FOUR.cells[3])),
        guest(shared_cell([0], 512)),
        None,
        code="pci:wrong-numa-node",
        pci=(pci_request("8086", "1520", 3, policy="required"),),
        pools=(PciDevicePool("8086", "1520", 1, 3, {"dev_type": "type-VF"}),),
    ),
    Case(
        "pci-socket-no-socket-info",
        with_cells(SHARED, c1=full(SHARED.cells[1])),
        guest(shared_cell([0], 512)),
        None,
        code="pci:no-socket-info",
        pci=(pci_request("8086", "1520", 3, policy="socket"),),
        pools=PCI,
    ),
    Case(
        "pci-guest-spans-both-cells",
        SEED,
        guest(shared_cell([0], 512, cid=0), shared_cell([1], 512, cid=1)),
        (0, 1),
        pci=(pci_request("8086", "1520", 6, policy="required"),),
        pools=PCI,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fit(case: Case) -> None:
    result = numa_fit_instance_to_host(
        case.host, case.guest, limits=case.limits, pci_requests=case.pci, pci_pools=case.pools
    )
    if case.cells is None:
        assert result.fitted is None, result
        assert not result
        assert result.code == case.code, result.detail
        assert result.detail  # a sentence for the operator, never empty
        return
    assert result.fitted is not None, f"{result.code}: {result.detail}"
    assert tuple(c.id for c in result.fitted.cells) == case.cells
    assert result.code is None
    if case.pagesizes is not None:
        assert tuple(c.pagesize for c in result.fitted.cells) == case.pagesizes
    if case.pinning is not None:
        assert tuple(dict(c.cpu_pinning or {}) for c in result.fitted.cells) == case.pinning
        for fitted_cell in result.fitted.cells:
            host_cell = case.host.cell(fitted_cell.id)
            assert host_cell is not None
            assert set((fitted_cell.cpu_pinning or {}).values()) <= host_cell.free_pcpus
    if case.reserved is not None or case.pinning is not None:
        assert result.fitted.cells[0].cpuset_reserved == case.reserved
    assert result.fitted.emulator_threads_policy == case.guest.emulator_threads_policy


def test_fit_never_mutates_inputs() -> None:
    g = guest(dedicated_cell(range(4), 1024))
    before_host, before_guest = SMT, g
    numa_fit_instance_to_host(SMT, g)
    assert SMT == before_host and g == before_guest
    assert g.cells[0].cpu_pinning is None


def test_detail_names_every_host_cell() -> None:
    result = numa_fit_instance_to_host(SEED, guest(shared_cell([0], 5120, GIB_KB)))
    assert result.code == "numa:pages-insufficient"
    assert "host cell 0" in result.detail and "offers no 1048576 KiB pages" in result.detail
    assert "host cell 1" in result.detail


def test_pack_strategy_prefers_used_cells() -> None:
    busy = with_cells(SHARED, c1={"memory_usage": 1000, "cpu_usage": 2})
    spread = numa_fit_instance_to_host(busy, guest(shared_cell([0], 256)))
    packed = numa_fit_instance_to_host(busy, guest(shared_cell([0], 256)), pack=True)
    assert spread.fitted is not None and packed.fitted is not None
    assert spread.fitted.cells[0].id == 0
    assert packed.fitted.cells[0].id == 1


def test_legacy_dedicated_cell_with_cpus_in_cpuset() -> None:
    legacy = InstanceNUMATopology(
        cells=(
            InstanceNUMACell(id=0, cpuset=frozenset({0, 1}), memory=512, cpu_policy="dedicated"),
        )
    )
    result = numa_fit_instance_to_host(SMT, legacy)
    assert result.fitted is not None
    assert result.fitted.cells[0].cpu_pinning == {0: 0, 1: 8}
    assert result.fitted.cells[0].pcpuset == frozenset({0, 1})
