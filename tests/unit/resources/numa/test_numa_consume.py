"""Multi-instance consumption: fit, consume, fit again until the host is full."""

from __future__ import annotations

import uuid

from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    Flavor,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NUMATopologyLimits,
    RequestSpec,
)
from asyncsched.resources.numa import (
    consume_numa_pci,
    numa_fit_instance_to_host,
    numa_usage_from_instance,
)
from asyncsched.state.host_state import HostState
from tests.support.numa_data import (
    GIB_KB,
    dedicated_cell,
    guest,
    host,
    pci_request,
    pools,
    shared_cell,
)

LIMITS = NUMATopologyLimits(cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)


def _state(topo: HostNUMATopology | None, pci: tuple[PciDevicePool, ...] = ()) -> HostState:
    return HostState(
        uuid=str(uuid.uuid4()),
        host="cmp1",
        nodename="cmp1.example",
        cell_uuid=str(uuid.uuid4()),
        numa_topology=topo,
        pci_pools=pci,
    )


def _spec(
    numa: InstanceNUMATopology | None, pci: tuple[InstancePCIRequest, ...] = ()
) -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(memory_mb=1024, vcpus=4),
        numa_topology=numa,
        pci_requests=InstancePCIRequests(requests=pci) if pci else None,
        instance_uuid=str(uuid.uuid4()),
    )


async def test_dedicated_instances_fill_the_host() -> None:
    state = _state(host("smt_dedicated.json"))
    spec = _spec(guest(dedicated_cell(range(4), 1024)))
    placed = []
    for _ in range(4):
        async with state.lock:
            gen = state.generation
            topo, pci, fitted = consume_numa_pci(state, spec, limits=LIMITS, provider_mapping=None)
        assert fitted is not None and topo is state.numa_topology and pci is None
        assert state.generation > gen
        placed.append((fitted.cells[0].id, frozenset(fitted.cells[0].cpu_pinning.values())))  # type: ignore[union-attr]
    # Spread: cell 0, then the emptier cell 1, then back; whole cores each time.
    assert placed == [
        (0, frozenset({0, 8, 1, 9})),
        (1, frozenset({4, 12, 5, 13})),
        (0, frozenset({2, 10, 3, 11})),
        (1, frozenset({6, 14, 7, 15})),
    ]
    assert state.numa_topology is not None
    assert all(c.pinned_cpus == c.pcpuset for c in state.numa_topology.cells)
    assert all(c.memory_usage == 2048 for c in state.numa_topology.cells)
    result = numa_fit_instance_to_host(state.numa_topology, spec.numa_topology, limits=LIMITS)  # type: ignore[arg-type]
    assert result.code == "numa:no-pinned-cpus"
    # A fifth consume must not crash nor change anything.
    before = state.numa_topology
    topo, _, fitted = consume_numa_pci(state, spec, limits=LIMITS, provider_mapping=None)
    assert fitted is None and topo is None and state.numa_topology is before


async def test_seed_1g_pages_consumed_until_none_left() -> None:
    state = _state(host("seed_1g_one_cell.json"))
    spec = _spec(guest(shared_cell([0, 1], 2048, GIB_KB)))
    for used in (2, 4):
        consume_numa_pci(state, spec, limits=LIMITS, provider_mapping=None)
        assert state.numa_topology is not None
        pages = state.numa_topology.cells[1].pages(GIB_KB)
        assert pages is not None and pages.used == used
        assert state.numa_topology.cells[1].cpu_usage == used  # two shared vCPUs each time
    assert state.numa_topology is not None
    result = numa_fit_instance_to_host(state.numa_topology, spec.numa_topology, limits=LIMITS)  # type: ignore[arg-type]
    assert result.code == "numa:pages-insufficient"
    assert "offers no 1048576 KiB pages" in result.detail  # cell 0 still explained


async def test_pci_devices_consumed_with_numa_affinity() -> None:
    state = _state(host("seed_1g_one_cell.json"), pools("pci_pools.json"))
    spec = _spec(guest(shared_cell([0], 512)), (pci_request("8086", "1520", 2, policy="required"),))
    cells = []
    for _ in range(3):
        _, new_pools, fitted = consume_numa_pci(state, spec, limits=LIMITS, provider_mapping=None)
        assert fitted is not None and new_pools is state.pci_pools
        cells.append(fitted.cells[0].id)
    # nova orders cells by free devices of any kind: node 1 (4 VFs + 1 PF) first, then node 0
    # (2 VFs + 2 remote-managed) has more left, then node 1's last pair.
    assert cells == [1, 0, 1]
    assert not any(p.product_id == "1520" for p in state.pci_pools)
    _, new_pools, fitted = consume_numa_pci(state, spec, limits=LIMITS, provider_mapping=None)
    assert fitted is None and new_pools is None


async def test_pci_only_consume_without_numa() -> None:
    state = _state(None, pools("pci_pools.json"))
    spec = _spec(None, (pci_request("10de", "1db4", 1),))
    topo, new_pools, fitted = consume_numa_pci(state, spec, limits=None, provider_mapping=None)
    assert topo is None and fitted is None
    assert new_pools is not None and all(p.product_id != "1db4" for p in new_pools)
    assert state.pci_pools == new_pools


def test_usage_add_then_free_restores_host() -> None:
    topo = host("smt_dedicated.json")
    fitted = numa_fit_instance_to_host(
        topo, guest(dedicated_cell(range(2), 1024, pagesize=2048), emulator="isolate")
    ).fitted
    assert fitted is not None
    used = numa_usage_from_instance(topo, fitted)
    c0 = used.cells[0]
    assert c0.pinned_cpus == frozenset({0, 8, 1})  # two vCPUs + the emulator thread CPU
    assert c0.memory_usage == 1024
    assert c0.pages(2048).used == 512  # type: ignore[union-attr]
    assert c0.pages(4).used == 0  # type: ignore[union-attr]
    assert numa_usage_from_instance(used, fitted, free=True) == topo


def test_isolate_pins_whole_cores() -> None:
    topo = host("nosmt_dedicated.json")
    fitted = numa_fit_instance_to_host(topo, guest(dedicated_cell(range(2), 512, "isolate"))).fitted
    assert fitted is not None
    used = numa_usage_from_instance(topo, fitted)
    assert used.cells[0].pinned_cpus == frozenset({0, 1})


def test_usage_tolerates_inconsistent_pinning() -> None:
    topo = host("smt_dedicated.json")
    fitted = numa_fit_instance_to_host(topo, guest(dedicated_cell(range(2), 512))).fitted
    assert fitted is not None
    once = numa_usage_from_instance(topo, fitted)
    twice = numa_usage_from_instance(once, fitted)  # nova would raise CPUPinningInvalid
    assert twice.cells[0].pinned_cpus == once.cells[0].pinned_cpus
    freed = numa_usage_from_instance(topo, fitted, free=True)  # unpinning what is not pinned
    assert freed.cells[0].pinned_cpus == frozenset()
    assert freed.cells[0].memory_usage == 0


async def test_filter_then_consume_until_pages_run_out() -> None:
    """Pinned 2 vCPU guests on 2M pages: CPUs allow 8, 2M pages (2 GiB per cell) only 4."""
    from asyncsched.conf.options import Config
    from asyncsched.scheduling.filters.base import HostCandidate
    from asyncsched.scheduling.filters.numa_topology import NUMATopologyFilter

    flt = NUMATopologyFilter(Config())
    state = _state(host("smt_dedicated.json"))
    spec = _spec(guest(dedicated_cell(range(2), 1024, pagesize=2048)))
    placed = 0
    while True:
        hc = HostCandidate(state, [{"mappings": {"": [state.uuid]}}])
        code = flt.host_passes(hc, spec)
        if code is not None:
            break
        async with state.lock:
            consume_numa_pci(
                state,
                spec,
                limits=hc.limits["numa_topology"],
                provider_mapping=hc.allocation_candidates[0]["mappings"],
            )
        placed += 1
        assert placed <= 8
    assert placed == 4
    assert code == "numa:pages-insufficient"
    assert state.numa_topology is not None
    assert [len(c.pinned_cpus) for c in state.numa_topology.cells] == [4, 4]


async def test_consume_follows_the_placement_allocation() -> None:
    """PCI in Placement: the pool on the allocated provider is the one decremented."""
    rp_b = "bbbbbbbb-0000-0000-0000-000000000000"
    state = _state(host("seed_1g_one_cell.json"), pools("pci_pools_placement.json"))
    spec = _spec(
        guest(shared_cell([0], 512)),
        (pci_request("10de", "1eb8", 1, policy="preferred", request_id="r1"),),
    )
    _, new_pools, fitted = consume_numa_pci(
        state, spec, limits=LIMITS, provider_mapping={"": ["root"], "r1-0": [rp_b]}
    )
    assert fitted is not None and fitted.cells[0].id == 1  # node 1 holds provider B's GPUs
    assert new_pools is not None
    assert [(p.tags["rp_uuid"][0], p.count) for p in new_pools] == [("a", 2), ("b", 1)]
