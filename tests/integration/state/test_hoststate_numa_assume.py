"""Pending NUMA/PCI consumption over real nova cell databases (real PostgreSQL).

The host's NUMA topology and PCI pools must always be: what the DB row says now, plus every
pending assumption re-applied in order. Consumption goes through the scheduler's own path
(``place_numa_pci`` under ``host.lock`` then ``consume_locked(..., placed=...)``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from asyncsched.objects.host_resources import (
    HostNUMATopology,
    PciDevicePool,
    parse_host_numa_topology,
    parse_pci_pools,
)
from asyncsched.objects.models import (
    Flavor,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NUMATopologyLimits,
    RequestContext,
    RequestSpec,
)
from asyncsched.placement.client import PlacementClient
from asyncsched.resources.numa import numa_usage_from_instance
from asyncsched.resources.numa.consume import place_numa_pci
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState, PlacedNumaPci
from tests.support.nova_db import NodeSpec, NovaDB, numa_topology_json, pci_stats_json
from tests.support.nova_objects import host_numa_topology_primitive
from tests.support.numa_data import dedicated_cell, guest, pci_request
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration

LIMITS = NUMATopologyLimits(cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)
MIB_2 = 2048  # KiB
VF = ("8086", "154c")  # the fixture's default pool: 8 VFs on NUMA node 0


class FakeClock:
    """Monotonic clock the test moves by hand (TTL expiry without sleeping)."""

    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def pinned_spec(
    memory_mb: int = 512, vcpus: int = 2, pci: tuple[InstancePCIRequest, ...] = ()
) -> RequestSpec:
    """A pinned guest on 2 MiB pages, optionally with PCI devices."""
    return RequestSpec(
        flavor=Flavor(memory_mb=memory_mb, vcpus=vcpus, root_gb=1),
        numa_topology=guest(dedicated_cell(range(vcpus), memory_mb, pagesize=MIB_2)),
        pci_requests=InstancePCIRequests(requests=pci) if pci else None,
    )


def pci_spec(count: int, *, rid: str) -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(memory_mb=256, vcpus=1),
        pci_requests=InstancePCIRequests(requests=(pci_request(*VF, count, request_id=rid),)),
    )


async def consume(
    cache: HostStateCache, hs: HostState, spec: RequestSpec, inst: str
) -> PlacedNumaPci:
    """What SchedulerManager does for one chosen host."""
    async with hs.lock:
        placed = place_numa_pci(hs, spec, limits=LIMITS, provider_mapping=None)
        assert placed is not None
        cache.consume_locked(hs, spec, inst, placed=placed)
    return placed


def fitted(p: PlacedNumaPci) -> InstanceNUMATopology:
    assert p.fitted is not None
    return p.fitted


def pins(p: PlacedNumaPci) -> dict[int, frozenset[int]]:
    """host cell id -> CPUs pinned by this placement."""
    out: dict[int, frozenset[int]] = {}
    for c in fitted(p).cells:
        assert c.cpu_pinning
        out[c.id] = out.get(c.id, frozenset()) | frozenset(c.cpu_pinning.values())
    return out


def with_usage(topo: HostNUMATopology, *placed: PlacedNumaPci) -> HostNUMATopology:
    for p in placed:
        topo = numa_usage_from_instance(topo, fitted(p))
    return topo


def pinned(hs: HostState) -> dict[int, frozenset[int]]:
    assert hs.numa_topology is not None
    return {c.id: c.pinned_cpus for c in hs.numa_topology.cells}


def topo_json(topo: HostNUMATopology) -> str:
    return json.dumps(host_numa_topology_primitive(topo))


def vf_count(pools: tuple[PciDevicePool, ...]) -> int:
    return sum(p.count for p in pools if (p.vendor_id, p.product_id) == VF)


@pytest.fixture
async def env(nova_db: NovaDB) -> AsyncIterator[dict[str, Any]]:
    """One idle 2-cell host (4 dedicated CPUs and 512 x 2 MiB pages per cell, 8 VFs)."""
    cell = nova_db.cells[0]
    name = f"numa-{uuid.uuid4().hex[:8]}"
    node = await nova_db.add_host(cell, NodeSpec(host=name))
    base = parse_host_numa_topology(numa_topology_json())
    assert base is not None
    yield {
        "db": nova_db,
        "cell": cell,
        "host": name,
        "node": node,
        "base": base,
        "pools": parse_pci_pools(pci_stats_json()),
    }


async def test_two_pinned_instances_survive_an_unrelated_db_change(env: dict[str, Any]) -> None:
    db: NovaDB = env["db"]
    base: HostNUMATopology = env["base"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None and hs.numa_topology == base
        ram0 = hs.free_ram_mb
        a = await consume(cache, hs, pinned_spec(), "inst-a")
        b = await consume(cache, hs, pinned_spec(), "inst-b")
        expected = with_usage(base, a, b)
        assert hs.numa_topology == expected

        # the compute reports other news: more memory used, one VF taken by a known instance
        await db.update_compute_node(
            env["cell"],
            env["node"],
            memory_mb_used=512 + 4096,
            free_ram_mb=ram0 - 4096,
            pci_stats=pci_stats_json([{**_vf_pool(), "count": 7}]),
        )
        await cache.refresh()
        assert hs.free_ram_mb == ram0 - 4096 - 1024  # the new DB value, minus both pending
        assert hs.numa_topology == expected  # both pinnings kept
        for cid, cpus in (*pins(a).items(), *pins(b).items()):
            assert cpus <= pinned(hs)[cid]
        assert vf_count(hs.pci_pools) == 7  # the new DB value

        # the DB's own NUMA view changes too (another, confirmed instance pins a free CPU and
        # uses memory): the fresh values are the base, not a snapshot taken at consume time
        cid, other = min(
            (c.id, min(c.pcpuset - c.pinned_cpus)) for c in expected.cells if c.avail_pcpus
        )
        db_topo = HostNUMATopology(
            cells=tuple(
                replace(c, pinned_cpus=frozenset({other}), memory_usage=1024) if c.id == cid else c
                for c in base.cells
            )
        )
        await db.update_compute_node(env["cell"], env["node"], numa_topology=topo_json(db_topo))
        await cache.refresh(full=True)
        assert hs.numa_topology == with_usage(db_topo, a, b)
        assert other in pinned(hs)[cid]
        for pcid, cpus in (*pins(a).items(), *pins(b).items()):
            assert cpus <= pinned(hs)[pcid]
        assert set(hs.assumed) == {"inst-a", "inst-b"}
        assert cache.health()["assumed_unfit"] == 0


def _vf_pool() -> dict[str, Any]:
    return {
        "vendor_id": VF[0],
        "product_id": VF[1],
        "numa_node": 0,
        "count": 8,
        "tags": {"dev_type": "type-VF", "physical_network": "physnet1"},
    }


async def test_db_shows_instance_a_then_only_b_is_reapplied(env: dict[str, Any]) -> None:
    db: NovaDB = env["db"]
    base: HostNUMATopology = env["base"]
    vf = (pci_request(*VF, 1, request_id="vf"),)
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None
        a = await consume(cache, hs, pinned_spec(pci=vf), "inst-a")
        b = await consume(cache, hs, pinned_spec(pci=vf), "inst-b")
        assert vf_count(hs.pci_pools) == 6

        # the compute built A, pinning it on its own choice of CPUs (another cell than our
        # guess): its row has that pinning, A's pages and VF; the instance is listed
        (guess_cell,) = fitted(a).cells
        own = next(c for c in base.cells if c.id != guess_cell.id)
        cpus = sorted(own.pcpuset)[:2]
        as_built = replace(guess_cell, id=own.id, cpu_pinning={0: cpus[0], 1: cpus[1]})
        db_topo = numa_usage_from_instance(base, InstanceNUMATopology(cells=(as_built,)))
        await db.add_instance(env["cell"], env["host"], uuid="inst-a")
        await db.update_compute_node(
            env["cell"],
            env["node"],
            numa_topology=topo_json(db_topo),
            pci_stats=pci_stats_json([{**_vf_pool(), "count": 7}]),
        )
        await cache.refresh()
        assert set(hs.assumed) == {"inst-b"}
        assert hs.numa_topology == with_usage(db_topo, b)  # B on top of the DB's own pinning
        assert set(cpus) <= pinned(hs)[own.id]  # A where the compute put it
        for cid, guessed in pins(a).items():  # not where we guessed
            assert not guessed & pinned(hs)[cid] - frozenset().union(*pins(b).values())
        for cid, bcpus in pins(b).items():
            assert bcpus <= pinned(hs)[cid]
        assert vf_count(hs.pci_pools) == 6  # 7 in the DB, B's still pending
        h = cache.health()
        assert h["assumptions_confirmed"] == 1 and h["assumed_unfit"] == 0


async def test_release_frees_exactly_its_cpus_pages_and_devices(env: dict[str, Any]) -> None:
    db: NovaDB = env["db"]
    base: HostNUMATopology = env["base"]
    pools0: tuple[PciDevicePool, ...] = env["pools"]
    vf2 = (pci_request(*VF, 2, request_id="vf"),)
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None
        ram0 = hs.free_ram_mb
        a = await consume(cache, hs, pinned_spec(pci=vf2), "inst-a")
        b = await consume(cache, hs, pinned_spec(1024, 4), "inst-b")
        c = await consume(cache, hs, pinned_spec(pci=vf2), "inst-c")
        assert vf_count(hs.pci_pools) == 4

        await cache.release(hs, "inst-a")
        assert hs.numa_topology == with_usage(base, b, c)
        assert all(not (cpus & pinned(hs)[cid]) for cid, cpus in pins(a).items())
        assert vf_count(hs.pci_pools) == 6
        assert hs.free_ram_mb == ram0 - 1024 - 512
        await cache.refresh(full=True)  # and a refresh agrees
        assert hs.numa_topology == with_usage(base, b, c) and vf_count(hs.pci_pools) == 6

        await cache.release(hs, "inst-c")
        assert hs.numa_topology == with_usage(base, b)
        assert vf_count(hs.pci_pools) == 8
        await cache.release(hs, "inst-b")
        assert hs.numa_topology == base and hs.pci_pools == pools0
        assert hs.free_ram_mb == ram0 and hs.assumed == {}
        assert cache.health()["assumptions_released"] == 3


async def test_pending_consumption_expires_by_ttl(env: dict[str, Any]) -> None:
    db: NovaDB = env["db"]
    base: HostNUMATopology = env["base"]
    clock = FakeClock()
    vf = (pci_request(*VF, 1, request_id="vf"),)
    async with HostStateCache(
        db.config(refresh_interval=3600, assumed_ttl=60), clock=clock
    ) as cache:
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None
        a = await consume(cache, hs, pinned_spec(pci=vf), "inst-a")
        clock.now += 30
        b = await consume(cache, hs, pinned_spec(pci=vf), "inst-b")
        clock.now += 31  # A is 61 s old, B 31 s
        await cache.refresh()
        assert set(hs.assumed) == {"inst-b"}
        assert hs.numa_topology == with_usage(base, b)
        assert all(not (cpus & pinned(hs)[cid]) for cid, cpus in pins(a).items())
        assert vf_count(hs.pci_pools) == 7
        clock.now += 30
        await cache.refresh()
        assert hs.assumed == {} and hs.numa_topology == base and vf_count(hs.pci_pools) == 8
        assert cache.health()["assumptions_expired"] == 2


async def test_pci_pools_follow_the_db_under_pending_claims(env: dict[str, Any]) -> None:
    db: NovaDB = env["db"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None
        await consume(cache, hs, pci_spec(2, rid="ra"), "pci-a")
        await consume(cache, hs, pci_spec(3, rid="rb"), "pci-b")
        assert vf_count(hs.pci_pools) == 3
        # another instance (already listed) took 2 VFs: the DB now says 6
        await db.update_compute_node(
            env["cell"], env["node"], pci_stats=pci_stats_json([{**_vf_pool(), "count": 6}])
        )
        await cache.refresh()
        assert vf_count(hs.pci_pools) == 1
        await cache.release(hs, "pci-a")
        assert vf_count(hs.pci_pools) == 3
        # the compute built B: 3 fewer in the DB, B confirmed, nothing pending
        await db.add_instance(env["cell"], env["host"], uuid="pci-b")
        await db.update_compute_node(
            env["cell"], env["node"], pci_stats=pci_stats_json([{**_vf_pool(), "count": 3}])
        )
        await cache.refresh()
        assert hs.assumed == {} and vf_count(hs.pci_pools) == 3
        # the DB now has fewer devices than a pending claim needs: not counted, not crashed
        await consume(cache, hs, pci_spec(2, rid="rc"), "pci-c")
        assert vf_count(hs.pci_pools) == 1
        await db.update_compute_node(
            env["cell"], env["node"], pci_stats=pci_stats_json([{**_vf_pool(), "count": 1}])
        )
        await cache.refresh()
        assert vf_count(hs.pci_pools) == 1  # the DB value, consistent (never negative)
        assert "PCI" in (hs.assumed["pci-c"].conflict or "")
        assert cache.health()["assumed_unfit"] == 1


async def test_reapply_that_no_longer_fits(env: dict[str, Any]) -> None:
    """The DB reports the CPUs of a pending instance pinned by another one: refit; when
    nothing fits, leave the NUMA part out (consistent), count it, and recover later."""
    db: NovaDB = env["db"]
    base: HostNUMATopology = env["base"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None
        ram0 = hs.free_ram_mb
        a = await consume(cache, hs, pinned_spec(), "inst-a")
        (cid, cpus), *_ = pins(a).items()

        # someone else now holds A's CPUs
        cells = tuple(
            replace(c, pinned_cpus=c.pinned_cpus | cpus) if c.id == cid else c for c in base.cells
        )
        taken = HostNUMATopology(cells=cells)
        await db.update_compute_node(env["cell"], env["node"], numa_topology=topo_json(taken))
        await cache.refresh()
        assert cache.health()["assumptions_refitted"] == 1
        refit = hs.assumed["inst-a"].placed
        assert refit is not None and pins(refit) != pins(a)
        for rcid, rcpus in pins(refit).items():
            assert not (rcpus & cpus)
            assert rcpus <= pinned(hs)[rcid]
        assert hs.numa_topology == with_usage(taken, refit)
        await cache.refresh()  # stable: not refitted again
        assert cache.health()["assumptions_refitted"] == 1

        # every dedicated CPU taken in the DB: A cannot be counted on NUMA at all
        full = HostNUMATopology(cells=tuple(replace(c, pinned_cpus=c.pcpuset) for c in base.cells))
        await db.update_compute_node(env["cell"], env["node"], numa_topology=topo_json(full))
        await cache.refresh()
        await cache.refresh(full=True)
        assert hs.numa_topology == full  # the DB's view, no CPU pinned twice, pages untouched
        assert hs.free_ram_mb == ram0 - 512  # the scalar part still counts
        h = cache.health()
        assert h["assumed_unfit"] == 1 and h["assumptions_unfit"] == 1  # counted once
        assert "NUMA" in (hs.assumed["inst-a"].conflict or "")

        # the other instances go away: A fits again and is counted again
        await db.update_compute_node(env["cell"], env["node"], numa_topology=topo_json(base))
        await cache.refresh()
        assert cache.health()["assumed_unfit"] == 0
        assert hs.assumed["inst-a"].conflict is None
        assert hs.numa_topology == with_usage(base, hs.assumed["inst-a"].placed)  # type: ignore[arg-type]
        await cache.release(hs, "inst-a")
        assert hs.numa_topology == base


async def test_scheduler_pins_survive_refresh_with_real_placement(
    env: dict[str, Any], placement_server: PlacementServer
) -> None:
    """The whole path: SchedulerManager over this cache and the real Placement places two
    pinned instances on the host; a refresh with a changed DB row keeps both pinnings."""
    db: NovaDB = env["db"]
    base: HostNUMATopology = env["base"]
    cfg = db.config(refresh_interval=3600)
    cfg = replace(
        cfg,
        placement=placement_server.options,
        filter_scheduler=replace(
            cfg.filter_scheduler, enabled_filters=("ComputeFilter", "NUMATopologyFilter")
        ),
    )
    async with placement_server.seeder() as seed:
        await seed.compute_node(env["host"], uuid=env["node"], vcpus=8, pcpus=8, memory_mb=131072)
    spec = replace(
        pinned_spec(),
        flavor=Flavor(
            memory_mb=512,
            vcpus=2,
            root_gb=1,
            extra_specs={"hw:cpu_policy": "dedicated", "hw:mem_page_size": "2048"},
        ),
        project_id="p",
        user_id="u",
        num_instances=2,
    )
    insts = [str(uuid.uuid4()) for _ in range(2)]
    async with (
        HostStateCache(cfg) as cache,
        PlacementClient(placement_server.options, claim_backoff=0.05) as placement,
    ):
        mgr = SchedulerManager(cfg, cache, placement)
        rows = await mgr.select_destinations(RequestContext(), spec, insts, True, True)
        assert [r[0].compute_node_uuid for r in rows] == [env["node"], env["node"]]
        hs = cache.get_by_uuid(env["node"])
        assert hs is not None and set(hs.assumed) == set(insts)
        placed = [hs.assumed[u].placed for u in insts]
        assert all(p is not None and p.fitted is not None for p in placed)
        expected = with_usage(base, *placed)  # type: ignore[arg-type]
        assert hs.numa_topology == expected
        assert sum(len(c) for c in pinned(hs).values()) == 4

        ram0 = hs.free_ram_mb + 1024
        await db.update_compute_node(
            env["cell"], env["node"], memory_mb_used=2560, free_ram_mb=ram0 - 2048
        )
        await cache.refresh()
        assert hs.free_ram_mb == ram0 - 2048 - 1024
        assert hs.numa_topology == expected
        assert cache.health()["assumed_unfit"] == 0
