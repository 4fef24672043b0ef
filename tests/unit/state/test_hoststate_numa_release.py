"""Pending NUMA/PCI usage on a host that has no DB snapshot (outside any loaded cell).

Release must still give back exactly that instance's pinned CPUs, pages and PCI devices, in
any order, and a second consume of the same instance must count it once.
"""

from __future__ import annotations

import uuid

import pytest

from asyncsched.conf.options import Config
from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    Flavor,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NUMATopologyLimits,
    RequestSpec,
)
from asyncsched.resources.numa import numa_usage_from_instance
from asyncsched.resources.numa.consume import (
    numa_usage_conflict,
    place_numa_pci,
    reapply_placed,
)
from asyncsched.resources.pci import pci_apply_requests
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState, PlacedNumaPci
from tests.support.numa_data import dedicated_cell, guest, host, pci_request, pools

LIMITS = NUMATopologyLimits(cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)


def _spec(pci: tuple[InstancePCIRequest, ...] = (), memory: int = 1024) -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(memory_mb=memory, vcpus=2),
        numa_topology=guest(dedicated_cell(range(2), memory, pagesize=2048)),
        pci_requests=InstancePCIRequests(requests=pci) if pci else None,
    )


def _host() -> HostState:
    hs = HostState(
        uuid=str(uuid.uuid4()),
        host="lonely",
        nodename="lonely",
        cell_uuid=str(uuid.uuid4()),
        numa_topology=host("smt_dedicated.json"),
        pci_pools=pools("pci_pools.json"),
    )
    hs.free_ram_mb = 65536
    return hs


def _consume(cache: HostStateCache, hs: HostState, spec: RequestSpec, inst: str) -> PlacedNumaPci:
    placed = place_numa_pci(hs, spec, limits=LIMITS, provider_mapping=None)
    assert placed is not None and placed.fitted is not None
    cache.consume_locked(hs, spec, inst, placed=placed)
    return placed


def _fitted(p: PlacedNumaPci) -> InstanceNUMATopology:
    assert p.fitted is not None
    return p.fitted


def _expected(
    topo: HostNUMATopology,
    pci: tuple[PciDevicePool, ...],
    *placed: tuple[PlacedNumaPci, RequestSpec],
) -> tuple[HostNUMATopology, tuple[PciDevicePool, ...]]:
    for p, spec in placed:
        reqs = spec.pci_requests.requests if spec.pci_requests is not None else ()
        if reqs:
            pci = pci_apply_requests(pci, reqs, numa_cells=_fitted(p).cells, host_topology=topo)
        topo = numa_usage_from_instance(topo, _fitted(p))
    return topo, pci


VF = pci_request("8086", "1520", 1)


@pytest.mark.parametrize("order", [("a", "b", "c"), ("c", "b", "a"), ("b", "a", "c")])
async def test_release_without_snapshot_in_any_order(order: tuple[str, ...]) -> None:
    cache = HostStateCache(Config())  # never started: the host has no DB snapshot
    hs = _host()
    topo0, pools0, ram0 = hs.numa_topology, hs.pci_pools, hs.free_ram_mb
    assert topo0 is not None
    specs = {"a": _spec((VF,)), "b": _spec(), "c": _spec((VF,), 512)}
    placed = {}
    async with hs.lock:
        for k in ("a", "b", "c"):
            placed[k] = _consume(cache, hs, specs[k], k)
    assert (hs.numa_topology, hs.pci_pools) == _expected(
        topo0, pools0, *((placed[k], specs[k]) for k in "abc")
    )
    assert sum(p.count for p in hs.pci_pools) == sum(p.count for p in pools0) - 2
    left = ["a", "b", "c"]
    for k in order:
        await cache.release(hs, k)
        left.remove(k)
        topo, pci = _expected(topo0, pools0, *((placed[x], specs[x]) for x in left))
        assert hs.numa_topology == topo
        assert hs.pci_pools == pci
        for cell in _fitted(placed[k]).cells:
            freed = frozenset(cell.cpu_pinning.values())  # type: ignore[union-attr]
            assert hs.numa_topology is not None
            assert not freed & hs.numa_topology.cells[cell.id].pinned_cpus
    assert hs.numa_topology == topo0 and hs.pci_pools == pools0
    assert hs.free_ram_mb == ram0 and hs.assumed == {} and hs.instances == set()
    assert cache.health()["assumptions_released"] == 3


async def test_same_instance_twice_counts_once_without_snapshot() -> None:
    cache = HostStateCache(Config())
    hs = _host()
    topo0, pools0 = hs.numa_topology, hs.pci_pools
    assert topo0 is not None
    spec = _spec((VF,))
    async with hs.lock:
        first = _consume(cache, hs, spec, "x")
        again = _consume(cache, hs, spec, "x")  # a retried consume of the same instance
    assert set(hs.assumed) == {"x"} and hs.free_ram_mb == 65536 - 1024
    assert (hs.numa_topology, hs.pci_pools) == _expected(topo0, pools0, (again, spec))
    assert _fitted(first) != _fitted(again)  # placed on top of the first one...
    await cache.release(hs, "x")  # ...yet releasing once restores the host
    assert hs.numa_topology == topo0 and hs.pci_pools == pools0


def test_conflict_reasons_and_reapply_never_raises() -> None:
    topo = host("smt_dedicated.json")
    hs = HostState(uuid="u", host="h", nodename="n", cell_uuid="c", numa_topology=topo)
    p = place_numa_pci(hs, _spec(), limits=LIMITS, provider_mapping=None)
    assert p is not None and p.fitted is not None
    assert numa_usage_conflict(topo, p.fitted) is None
    assert "pinned" in (numa_usage_conflict(hs.numa_topology, p.fitted) or "")  # type: ignore[arg-type]
    gone = HostNUMATopology(cells=tuple(c for c in topo.cells if c.id != p.fitted.cells[0].id))
    assert "gone" in (numa_usage_conflict(gone, p.fitted) or "")
    # no NUMA topology any more and no PCI pools: both parts left out, with reasons
    r = reapply_placed(PlacedNumaPci(fitted=p.fitted, pci_requests=(VF,)), None, ())
    assert r.numa_topology is None and r.pci_pools == ()
    assert r.conflict is not None and "NUMA" in r.conflict and "PCI" in r.conflict
    # garbage in the record (a bug somewhere) is reported, never raised
    bad = PlacedNumaPci(fitted=InstanceNUMATopology(cells=(None,)))  # type: ignore[arg-type]
    r = reapply_placed(bad, topo, ())
    assert r.numa_topology is topo and r.conflict is not None and "internal" in r.conflict
