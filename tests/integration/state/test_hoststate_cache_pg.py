"""HostStateCache against real nova databases in the real PostgreSQL."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import pytest

from asyncsched.conf.options import Config, DefaultOptions
from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    Aggregate,
    Flavor,
    InstancePCIRequest,
    InstancePCIRequests,
    RequestSpec,
)
from asyncsched.resources.numa.consume import place_numa_pci
from asyncsched.state.cache import HostStateCache
from tests.support.nova_db import NodeSpec, NovaDB, old, pci_stats_json, stats_json
from tests.support.nova_db_mysql import past_the_second
from tests.support.table_lock import table_locked

pytestmark = pytest.mark.integration


class FakeClock:
    """Monotonic clock the test moves by hand (TTL expiry without sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def spec(memory_mb: int = 2048, vcpus: int = 2, root_gb: int = 20, eph: int = 0) -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(memory_mb=memory_mb, vcpus=vcpus, root_gb=root_gb, ephemeral_gb=eph)
    )


async def started(cfg: Config, clock: Callable[[], float] | None = None) -> HostStateCache:
    cache = HostStateCache(cfg, clock=clock)
    await cache.start()
    return cache


@pytest.fixture
async def seeded(nova_db: NovaDB) -> AsyncIterator[dict[str, Any]]:
    """cell1: c1-a (2 instances), c1-b (ratios set, disk_available_least); cell2: c2-a."""
    c1, c2 = nova_db.cells
    ids: dict[str, Any] = {"db": nova_db, "c1": c1, "c2": c2}
    ids["c1a"] = await nova_db.add_host(
        c1,
        NodeSpec(
            host="c1-a",
            memory_mb=65536,
            memory_mb_used=4608,
            local_gb=500,
            local_gb_used=40,
            vcpus=32,
            vcpus_used=4,
            stats=stats_json(num_instances=2, io_workload=1, failed_builds=3),
        ),
    )
    ids["c1b"] = await nova_db.add_host(
        c1,
        NodeSpec(
            host="c1-b",
            local_gb=800,
            local_gb_used=100,
            disk_available_least=600,
            cpu_allocation_ratio=2.0,
            ram_allocation_ratio=1.5,
            disk_allocation_ratio=None,
            host_ip="10.0.0.7",
        ),
    )
    ids["c2a"] = await nova_db.add_host(c2, NodeSpec(host="c2-a"))
    ids["i1"] = await nova_db.add_instance(c1, "c1-a")
    ids["i2"] = await nova_db.add_instance(c1, "c1-a")
    ids["agg_id"], ids["agg_uuid"] = await nova_db.add_aggregate(
        "az1", ["c1-a", "c2-a"], {"availability_zone": "az1", "max_io_ops_per_host": "4"}
    )
    yield ids


async def test_full_load_of_two_cells(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c1, c2 = seeded["c1"], seeded["c2"]
    # a node whose usage is not reported yet, and one without a service row: both skipped
    await db.add_host(c2, NodeSpec(host="c2-new", free_disk_gb=None))
    orphan = await db.add_compute_node(c2, NodeSpec(host="c2-orphan"))
    async with HostStateCache(db.config()) as cache:
        assert {c.uuid for c in cache.cells()} == {c1.uuid, c2.uuid}  # no cell0
        assert len(cache.all_hosts()) == 3
        assert cache.get_by_uuid(orphan) is None
        assert cache.get_by_host_node("c2-new") == []

        a = cache.get_by_uuid(seeded["c1a"])
        assert a is not None
        assert (a.host, a.nodename, a.cell_uuid) == ("c1-a", "c1-a", c1.uuid)
        assert a.total_usable_ram_mb == 65536
        assert a.free_ram_mb == 65536 - 4608
        assert a.total_usable_disk_gb == 500
        assert a.disk_mb_used == 40 * 1024
        assert a.free_disk_mb == 460 * 1024
        assert (a.vcpus_total, a.vcpus_used) == (32, 4)
        # 0.0 in the DB -> initial_*_allocation_ratio
        assert (a.cpu_allocation_ratio, a.ram_allocation_ratio, a.disk_allocation_ratio) == (
            4.0,
            1.0,
            1.0,
        )
        assert (a.num_instances, a.num_io_ops, a.failed_builds) == (2, 1, 3)
        assert a.stats["num_vm_active"] == "2"
        assert a.instances == {seeded["i1"], seeded["i2"]}
        assert a.hypervisor_type == "QEMU" and a.hypervisor_version == 8002000
        assert json.loads(a.cpu_info or "{}")["arch"] == "x86_64"
        assert a.supported_instances == (("x86_64", "kvm", "hvm"), ("i686", "kvm", "hvm"))
        assert a.metrics["cpu.frequency"] == 2400.0
        assert isinstance(a.numa_topology, HostNUMATopology)
        assert len(a.numa_topology.cells) == 2
        assert a.numa_topology.cells[0].pcpuset == frozenset({4, 5, 6, 7})
        assert a.pci_pools == (
            PciDevicePool(
                vendor_id="8086",
                product_id="154c",
                numa_node=0,
                count=8,
                tags={"dev_type": "type-VF", "physical_network": "physnet1"},
            ),
        )
        assert a.service is not None and a.service.host == "c1-a"
        assert not a.service.disabled and not a.service.forced_down
        assert a.service.last_seen_up is not None and a.service.last_seen_up.tzinfo is not None
        assert [g.name for g in a.aggregates] == ["az1"]
        assert a.aggregates[0].metadata["availability_zone"] == "az1"

        b = cache.get_by_host_node("c1-b", "c1-b")[0]
        assert b.free_disk_mb == 600 * 1024  # min(free_disk_gb=700, disk_available_least=600)
        assert (b.cpu_allocation_ratio, b.ram_allocation_ratio, b.disk_allocation_ratio) == (
            2.0,
            1.5,
            1.0,
        )
        assert b.host_ip == "10.0.0.7"
        assert b.aggregates == ()
        assert b.instances == set()

        assert {h.host for h in cache.hosts_in_cell(c1.uuid)} == {"c1-a", "c1-b"}
        assert [h.host for h in cache.hosts_in_cell(c2.uuid)] == ["c2-a"]
        got = cache.get_by_uuids([seeded["c2a"], "not-a-node", seeded["c1b"]])
        assert [h.host for h in got] == ["c2-a", "c1-b"]
        assert [g.uuid for g in cache.aggregates_for_host("c2-a")] == [seeded["agg_uuid"]]
        h = cache.health()
        assert h["ready"] and not h["stale"] and h["hosts"] == 3
        assert h["cells"][c1.uuid]["hosts"] == 2


async def test_config_ratio_overrides(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    cfg = replace(db.config(), default=DefaultOptions(cpu_allocation_ratio=16.0))
    async with HostStateCache(cfg) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        b = cache.get_by_uuid(seeded["c1b"])
        assert a is not None and b is not None
        assert a.cpu_allocation_ratio == 16.0  # 0.0 in DB -> [DEFAULT] cpu_allocation_ratio
        assert b.cpu_allocation_ratio == 2.0  # a node's own value wins
        cache.reconfigure(db.config())
        for _ in range(50):
            if a.cpu_allocation_ratio == 4.0:
                break
            await asyncio.sleep(0.01)
        assert a.cpu_allocation_ratio == 4.0


async def test_incremental_refresh(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c1, c2 = seeded["c1"], seeded["c2"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        b = cache.get_by_uuid(seeded["c1b"])
        c = cache.get_by_uuid(seeded["c2a"])
        assert a is not None and b is not None and c is not None
        gen_a, gen_c = a.generation, c.generation

        await db.update_compute_node(
            c1, seeded["c1a"], free_ram_mb=1000, vcpus_used=30, stats=stats_json(7, 2, 0)
        )
        await db.update_service(c1, "c1-b", disabled=True, disabled_reason="maintenance")
        await db.update_service(c2, "c2-a", last_seen_up=old(3600))
        await db.move_instance(c1, seeded["i1"], "c1-b")
        new_node = await db.add_host(c2, NodeSpec(host="c2-b"))
        epoch = cache.hosts_epoch
        await cache.refresh()
        assert cache.hosts_epoch != epoch  # a host joined: lists of hosts built before are stale

        assert a.free_ram_mb == 1000 and a.vcpus_used == 30
        assert (a.num_instances, a.num_io_ops) == (7, 2)
        assert a.instances == {seeded["i2"]}
        assert a.generation > gen_a
        assert b.service is not None and b.service.disabled
        assert b.service.disabled_reason == "maintenance"
        assert b.instances == {seeded["i1"]}
        assert c.service is not None and c.service.last_seen_up is not None
        assert (c.service.updated_at or c.service.last_seen_up) > c.service.last_seen_up
        assert c.generation > gen_c
        assert cache.get_by_uuid(new_node) is not None

        # nothing changed: no generation bump on an unrelated host, the same hosts
        gen_b, epoch = b.generation, cache.hosts_epoch
        await cache.refresh()
        assert b.generation == gen_b and cache.hosts_epoch == epoch

        # soft-deleted node and soft-deleted instance disappear
        await db.delete_compute_node(c1, seeded["c1b"])
        await db.delete_instance(c1, seeded["i2"])
        epoch = cache.hosts_epoch
        await cache.refresh()
        assert cache.get_by_uuid(seeded["c1b"]) is None and cache.hosts_epoch != epoch
        assert cache.get_by_host_node("c1-b") == []
        assert a.instances == set()

        # a hard delete is invisible to watermarks, a full resync catches it
        await db.hard_delete_compute_node(c2, new_node)
        await cache.refresh()
        assert cache.get_by_uuid(new_node) is not None
        await cache.refresh(full=True)
        assert cache.get_by_uuid(new_node) is None
        assert cache.health()["full_resyncs"] >= 4  # 2 at start + 2 now

        # a deleted service drops its nodes; malformed JSON only empties that field
        await db.delete_service(c2, "c2-a")
        await db.update_compute_node(c1, seeded["c1a"], numa_topology="{not json", metrics="[1")
        await cache.refresh()
        assert cache.get_by_uuid(seeded["c2a"]) is None
        assert a.numa_topology is None and a.metrics == {}
        assert a.free_ram_mb == 1000


async def test_aggregates_from_casts_and_db(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        b = cache.get_by_uuid(seeded["c1b"])
        c = cache.get_by_uuid(seeded["c2a"])
        assert a is not None and b is not None and c is not None
        agg = cache.aggregates()[0]
        # nova's update_aggregates: the listed hosts are the aggregate's hosts now
        moved = Aggregate(
            id=agg.id, uuid=agg.uuid, name="az1", hosts=("c1-b",), metadata={"k": "v"}
        )
        gen = b.generation
        await cache.events.update_aggregates([moved])
        assert a.aggregates == () and c.aggregates == ()
        assert b.aggregates == (moved,) and b.generation > gen
        assert cache.aggregates_for_host("c1-b") == (moved,)
        new = Aggregate(id=999, uuid="u-999", name="gpu", hosts=("c1-a", "c1-b"))
        await cache.events.update_aggregates([new])
        assert [x.id for x in b.aggregates] == [agg.id, 999]
        await cache.events.delete_aggregate(moved)
        assert b.aggregates == (new,)
        assert {x.id for x in cache.aggregates()} == {999}
        # the API DB is the truth at the next refresh
        await db.add_aggregate_host(seeded["agg_id"], "c1-b")
        await cache.refresh()
        assert {x.id for x in cache.aggregates()} == {seeded["agg_id"]}
        assert [x.hosts for x in b.aggregates] == [("c1-a", "c2-a", "c1-b")]
        await db.remove_aggregate_host(seeded["agg_id"], "c1-a")
        await cache.refresh()
        assert not a.aggregates
        await db.delete_aggregate(seeded["agg_id"])
        await cache.refresh()
        assert cache.aggregates() == [] and not b.aggregates and not c.aggregates


async def test_cell_db_goes_away_and_comes_back(
    seeded: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    db: NovaDB = seeded["db"]
    c1, c2 = seeded["c1"], seeded["c2"]
    cfg = db.config(refresh_interval=3600, db_query_timeout=3, db_reconnect_max=1)
    async with HostStateCache(cfg) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        c = cache.get_by_uuid(seeded["c2a"])
        assert a is not None and c is not None
        await db.take_cell_away(c1)
        try:
            with caplog.at_level(logging.WARNING, logger="asyncsched.state.db"):
                await db.update_compute_node(c2, seeded["c2a"], free_ram_mb=4242)
                await cache.refresh()
            h = cache.health()
            assert h["stale"] and h["cells"][c1.uuid]["stale"]
            assert h["cells"][c1.uuid]["last_error"]
            assert not h["cells"][c2.uuid]["stale"]
            assert any("unavailable" in r.getMessage() for r in caplog.records)
            # last known state keeps serving; the healthy cell keeps refreshing
            assert cache.get_by_uuid(seeded["c1a"]) is a and a.free_ram_mb == 65536 - 4608
            assert c.free_ram_mb == 4242
            await cache.refresh()
            assert cache.health()["cells"][c1.uuid]["consecutive_failures"] == 2
        finally:
            await db.bring_cell_back(c1)
        await db.update_compute_node(c1, seeded["c1a"], free_ram_mb=777)
        await cache.refresh()
        h = cache.health()
        assert not h["stale"] and h["cells"][c1.uuid]["consecutive_failures"] == 0
        assert a.free_ram_mb == 777


async def test_cell_recovers_by_itself_in_background(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    cfg = db.config(refresh_interval=0.1, refresh_jitter=0.0, db_reconnect_max=1)
    async with HostStateCache(cfg) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        assert a is not None
        await db.take_cell_away(c1)
        try:
            for _ in range(100):
                if cache.health()["cells"][c1.uuid]["stale"]:
                    break
                await asyncio.sleep(0.05)
            assert cache.health()["cells"][c1.uuid]["stale"]
        finally:
            await db.bring_cell_back(c1)
        await db.update_compute_node(c1, seeded["c1a"], free_ram_mb=1234)
        for _ in range(100):
            if a.free_ram_mb == 1234 and not cache.health()["stale"]:
                break
            await asyncio.sleep(0.05)
        assert a.free_ram_mb == 1234
        assert not cache.health()["cells"][c1.uuid]["stale"]


async def test_a_cell_that_answers_again_is_probed_not_backed_off(seeded: dict[str, Any]) -> None:
    """Default [asyncsched] db_reconnect_max: a database that was down for a while is probed
    cheaply (no refresh passes meanwhile), the next probe never more than 0.5 s away, and read
    as soon as it answers. No clock: the old backoff (1, 2, 4, ... 30 s) shows as a later
    ``retry_in`` after 6 s away. The time from the cell answering to its read is printed."""
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    async with HostStateCache(db.config(refresh_interval=0.2)) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        assert a is not None
        await db.take_cell_away(c1)
        try:
            async with asyncio.timeout(10):
                while not cache.health()["cells"][c1.uuid]["stale"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.02)
            failed_passes = cache.metrics["refresh_failures"]
            await asyncio.sleep(6)  # long enough for the old backoff to reach 8 s
            h = cache.health()["cells"][c1.uuid]
            assert h["consecutive_failures"] >= 10 and h["retry_in"] <= 0.5  # probes, capped
            assert cache.metrics["refresh_failures"] == failed_passes  # no passes, only probes
        finally:
            await db.bring_cell_back(c1)
        back = asyncio.get_running_loop().time()
        await db.update_compute_node(c1, seeded["c1a"], free_ram_mb=2222)
        async with asyncio.timeout(10):  # a hang guard
            while a.free_ram_mb != 2222 or cache.health()["cells"][c1.uuid]["stale"]:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
        read_again = asyncio.get_running_loop().time() - back
        assert cache.health()["cells"][c1.uuid]["consecutive_failures"] == 0
    print(f"\ncell database back -> read again and not stale: {read_again:.3f} s")


async def test_cell_dropped_when_unmapped_or_disabled(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c1, c2 = seeded["c1"], seeded["c2"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        await db.set_cell_disabled(c2, True)
        await cache.refresh()
        assert [c.uuid for c in cache.cells()] == [c1.uuid]
        assert cache.get_by_uuid(seeded["c2a"]) is None
        assert cache.hosts_in_cell(c2.uuid) == []
        await db.set_cell_disabled(c2, False)
        await cache.refresh()
        for _ in range(100):  # a re-enabled cell is loaded in the background
            if cache.get_by_uuid(seeded["c2a"]) is not None:
                break
            await asyncio.sleep(0.02)
        assert cache.get_by_uuid(seeded["c2a"]) is not None
        await db.remove_cell_mapping(c1)
        await cache.refresh()
        assert [c.uuid for c in cache.cells()] == [c2.uuid]
        assert cache.get_by_uuid(seeded["c1a"]) is None
        assert c1.uuid not in cache.health()["cells"]


async def test_dead_api_db_keeps_serving(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    async with HostStateCache(db.config(refresh_interval=3600, db_query_timeout=3)) as cache:
        api_cell = type(seeded["c1"])(id=0, uuid="api", name="api", dbname=db.api_dbname)
        await db.take_cell_away(api_cell)
        try:
            await cache.refresh()
            h = cache.health()
            assert h["api"]["stale"] and h["stale"] and h["hosts"] == 3
            assert len(cache.aggregates()) == 1 and len(cache.cells()) == 2
        finally:
            await db.bring_cell_back(api_cell)
        await cache.refresh()
        assert not cache.health()["api"]["stale"]


async def test_assume_confirm_expire_release(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    clock = FakeClock()
    cfg = db.config(refresh_interval=3600, assumed_ttl=60)
    async with HostStateCache(cfg, clock=clock) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        assert a is not None
        ram0, disk0, cpu0 = a.free_ram_mb, a.free_disk_mb, a.vcpus_used
        topo0 = a.numa_topology
        await cache.consume(a, spec(4096, 4, 40, 10), "inst-x")
        assert a.free_ram_mb == ram0 - 4096
        assert a.free_disk_mb == disk0 - 50 * 1024
        assert a.vcpus_used == cpu0 + 4
        assert (a.num_instances, a.num_io_ops) == (3, 2)
        assert "inst-x" in a.instances and a.numa_topology is topo0  # no NUMA request
        await cache.consume(a, spec(1024, 1, 0), "inst-y")

        # a refresh with unchanged DB and a full resync both keep the assumptions
        await cache.refresh()
        await cache.refresh(full=True)
        assert a.free_ram_mb == ram0 - 5120 and a.vcpus_used == cpu0 + 5
        assert {"inst-x", "inst-y"} <= a.instances

        # the compute reports inst-x: its row now includes it; no double counting
        await db.add_instance(c1, "c1-a", uuid="inst-x")
        await db.update_compute_node(
            c1, seeded["c1a"], free_ram_mb=ram0 - 4096, vcpus_used=cpu0 + 4
        )
        await cache.refresh()
        assert set(a.assumed) == {"inst-y"}
        assert a.free_ram_mb == ram0 - 4096 - 1024
        assert a.vcpus_used == cpu0 + 5
        assert a.numa_topology is not None
        assert cache.health()["assumptions_confirmed"] == 1

        # a failed claim releases at once
        await cache.consume(a, spec(512, 1, 0), "inst-z")
        await cache.release(a, "inst-z")
        assert a.free_ram_mb == ram0 - 4096 - 1024 and "inst-z" not in a.instances

        # inst-y is never reported: it expires after assumed_ttl
        clock.now += 61
        await cache.refresh()
        assert a.assumed == {}
        assert a.free_ram_mb == ram0 - 4096 and "inst-y" not in a.instances
        h = cache.health()
        assert h["assumptions_expired"] == 1 and h["assumptions_released"] == 1


async def test_consumption_racing_refreshes(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        assert a is not None
        ram0 = a.free_ram_mb

        async def consumer(i: int) -> None:
            await cache.consume(a, spec(100, 1, 0), f"race-{i}")
            await asyncio.sleep(0)

        async def refresher() -> None:
            for full in (False, True, False, True):
                await cache.refresh(full=full)

        await asyncio.gather(refresher(), *(consumer(i) for i in range(40)))
        await cache.refresh(full=True)
        assert len(a.assumed) == 40
        assert a.free_ram_mb == ram0 - 4000
        assert a.num_instances == 2 + 40


async def test_many_concurrent_consumers_one_host(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    await db.update_compute_node(c1, seeded["c1b"], free_ram_mb=10 * 1024)
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        b = cache.get_by_uuid(seeded["c1b"])
        assert b is not None
        placed: list[int] = []

        async def request(i: int) -> None:
            # what the scheduler does: check and consume under the host lock, with an await
            # (the Placement claim) in between
            async with b.lock:
                if b.free_ram_mb < 1024:
                    return
                await asyncio.sleep(0.001)
                cache.consume_locked(b, spec(1024, 1, 0), f"c-{i}")
                placed.append(i)

        await asyncio.gather(*(request(i) for i in range(60)), cache.refresh(full=True))
        assert len(placed) == 10
        assert b.free_ram_mb == 0
        assert b.instances >= {f"c-{i}" for i in placed}


async def test_instance_info_casts(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    c2 = seeded["c2"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        c = cache.get_by_uuid(seeded["c2a"])
        assert a is not None and c is not None
        await cache.events.update_instance_info("c1-a", ["new-1"])
        assert a.instances == {seeded["i1"], seeded["i2"], "new-1"}
        await cache.events.delete_instance_info("c1-a", seeded["i1"])
        assert a.instances == {seeded["i2"], "new-1"}
        # sync that matches: nothing to do; a mismatch re-reads the DB in the background
        await cache.events.sync_instance_info("c1-a", [seeded["i2"], "new-1"])
        assert a.instances == {seeded["i2"], "new-1"}
        await cache.events.sync_instance_info("c1-a", [seeded["i2"]])
        for _ in range(100):
            if a.instances == {seeded["i1"], seeded["i2"]}:
                break
            await asyncio.sleep(0.01)
        assert a.instances == {seeded["i1"], seeded["i2"]}  # what the cell DB says
        # a host we track but have no instances for yet, and a host in no cell at all
        i3 = await db.add_instance(c2, "c2-a")
        await cache.events.sync_instance_info("c2-a", [i3])
        for _ in range(100):
            if c.instances == {i3}:
                break
            await asyncio.sleep(0.01)
        assert c.instances == {i3}
        await cache.events.update_instance_info("nowhere", ["x", "y"])
        await cache.events.delete_instance_info("nowhere", "x")
        assert cache.get_by_host_node("nowhere") == []


async def test_unreachable_databases_at_start(nova_db: NovaDB) -> None:
    cfg = nova_db.config(refresh_interval=3600, db_query_timeout=2)
    c1 = nova_db.cells[0]
    await nova_db.add_host(c1, "only")
    await nova_db.take_cell_away(c1)
    try:
        async with HostStateCache(cfg) as cache:
            h = cache.health()
            assert not h["ready"] and h["cells"][c1.uuid]["stale"]
            assert cache.all_hosts() == []
            await nova_db.bring_cell_back(c1)
            await cache.refresh()
            assert cache.health()["ready"]
            assert [x.host for x in cache.all_hosts()] == ["only"]
    finally:
        try:
            await nova_db.bring_cell_back(c1)
        except Exception:
            pass


async def test_pci_pools_consumed(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    pools = [
        {"vendor_id": "10de", "product_id": "1eb8", "numa_node": 1, "count": 2, "tags": {}},
    ]
    await db.update_compute_node(seeded["c1"], seeded["c1b"], pci_stats=pci_stats_json(pools))
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        b = cache.get_by_uuid(seeded["c1b"])
        assert b is not None and b.pci_pools[0].count == 2
        gpu = InstancePCIRequest(count=1, spec=({"vendor_id": "10de", "product_id": "1eb8"},))
        want = replace(spec(), pci_requests=InstancePCIRequests(requests=(gpu,)))
        async with b.lock:
            placed = place_numa_pci(b, want, limits=None, provider_mapping=None)
            assert placed is not None and placed.pci_requests == (gpu,)
            cache.consume_locked(b, want, "gpu-vm", placed=placed)
        after = (replace(b.pci_pools[0], count=1),)
        assert b.pci_pools == after
        await cache.refresh(full=True)  # the usage is re-applied over the fresh pools
        assert b.pci_pools == after
        await cache.release(b, "gpu-vm")
        assert b.pci_pools[0].count == 2


async def test_api_db_down_at_start_then_back(seeded: dict[str, Any]) -> None:
    db: NovaDB = seeded["db"]
    api_cell = type(seeded["c1"])(id=0, uuid="api", name="api", dbname=db.api_dbname)
    cfg = db.config(
        refresh_interval=0.1, refresh_jitter=0.0, db_query_timeout=2, db_reconnect_max=1
    )
    await db.take_cell_away(api_cell)
    try:
        cache = await started(cfg)
    finally:
        await db.bring_cell_back(api_cell)
    try:
        assert not cache.health()["ready"] and cache.all_hosts() == []
        for _ in range(100):  # the API loop retries by itself and then loads every cell
            if len(cache.all_hosts()) == 3 and cache.health()["ready"]:
                break
            await asyncio.sleep(0.05)
        assert len(cache.all_hosts()) == 3 and cache.health()["ready"]
        await cache.events.update_instance_info("c2-a", ["after"])  # casts work once loaded
        c = cache.get_by_uuid(seeded["c2a"])
        assert c is not None and "after" in c.instances
    finally:
        await cache.close()
    await cache.events.update_instance_info("c2-a", ["late"])  # a cast after close is harmless


async def test_slow_cell_never_blocks_the_other(seeded: dict[str, Any]) -> None:
    """cell1's compute_nodes is locked (queries hang); cell2 keeps refreshing meanwhile, and
    cell1 times out into 'stale' and recovers once the lock is gone."""
    db: NovaDB = seeded["db"]
    c1, c2 = seeded["c1"], seeded["c2"]
    cfg = db.config(
        refresh_interval=0.1, refresh_jitter=0.0, db_query_timeout=1, db_reconnect_max=1
    )
    async with HostStateCache(cfg) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        c = cache.get_by_uuid(seeded["c2a"])
        assert a is not None and c is not None
        async with table_locked(db, c1, "compute_nodes"):
            await db.update_compute_node(c2, seeded["c2a"], free_ram_mb=31337)
            for _ in range(100):
                if c.free_ram_mb == 31337 and cache.health()["cells"][c1.uuid]["stale"]:
                    break
                await asyncio.sleep(0.05)
            assert c.free_ram_mb == 31337  # seen while cell1 hangs
            h = cache.health()["cells"]
            assert h[c1.uuid]["stale"] and "Timeout" in (h[c1.uuid]["last_error"] or "")
            assert not h[c2.uuid]["stale"]
            assert cache.get_by_uuid(seeded["c1a"]) is a  # still served
        await db.update_compute_node(c1, seeded["c1a"], free_ram_mb=999)
        for _ in range(100):
            if a.free_ram_mb == 999 and not cache.health()["stale"]:
                break
            await asyncio.sleep(0.05)
        assert a.free_ram_mb == 999 and not cache.health()["stale"]


async def test_reads_are_paged(seeded: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncsched.state.readers as readers

    monkeypatch.setattr(readers, "NODE_PAGE", 2)
    monkeypatch.setattr(readers, "INSTANCE_PAGE", 1)
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    extra = [await db.add_host(c1, f"p-{i}") for i in range(5)]
    insts = [await db.add_instance(c1, f"p-{i % 2}") for i in range(3)]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        assert len(cache.all_hosts()) == 8
        p0 = cache.get_by_host_node("p-0")[0]
        assert p0.instances == {insts[0], insts[2]}
        for u in extra:
            await db.update_compute_node(c1, u, free_ram_mb=5)
        await db.move_instance(c1, insts[1], "p-0")
        await cache.refresh()
        assert all(h.free_ram_mb == 5 for h in cache.get_by_uuids(extra))
        assert p0.instances == set(insts)


async def test_casts_do_not_confirm_but_delete_releases(seeded: dict[str, Any]) -> None:
    """The compute's instance list can arrive before its usage is re-read: keep the
    assumption until a DB pass; a deleted instance frees what we assumed for it."""
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        a = cache.get_by_uuid(seeded["c1a"])
        assert a is not None
        ram0 = a.free_ram_mb
        await cache.consume(a, spec(2048, 1, 0), "built")
        await cache.events.update_instance_info("c1-a", ["built"])
        assert "built" in a.assumed and a.free_ram_mb == ram0 - 2048
        await db.add_instance(c1, "c1-a", uuid="built")
        await db.update_compute_node(c1, seeded["c1a"], free_ram_mb=ram0 - 2048)
        await cache.refresh()
        assert a.assumed == {} and a.free_ram_mb == ram0 - 2048
        assert cache.health()["assumptions_confirmed"] == 1

        await cache.consume(a, spec(1024, 1, 0), "doomed")
        await cache.events.delete_instance_info("c1-a", "doomed")
        assert "doomed" not in a.assumed and "doomed" not in a.instances
        assert a.free_ram_mb == ram0 - 2048


async def test_reread_services_rows_are_fetched_only_when_their_stamp_moved(
    seeded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watermark overlap re-reads every recent services row: only the stamps are read
    again, whole rows only for the services whose row changed since it was applied."""
    from asyncsched.state.db import NovaDatabase

    fetched: list[list[int]] = []
    real_fetch = NovaDatabase.fetch

    async def spying_fetch(self: NovaDatabase, sql: str, *args: Any) -> Any:
        if sql == self.sql.services_by_id:
            fetched.append(sorted(args[0]))
        return await real_fetch(self, sql, *args)

    monkeypatch.setattr(NovaDatabase, "fetch", spying_fetch)
    db: NovaDB = seeded["db"]
    c1 = seeded["c1"]
    await past_the_second(db)  # rows of the load's own second are read again
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        b = cache.get_by_uuid(seeded["c1b"])
        assert b is not None and b.service is not None
        await db.update_service(c1, "c1-b", disabled=True, disabled_reason="maintenance")
        await past_the_second(db)  # the read that applies it is in a later second
        fetched.clear()
        await cache.refresh()
        assert fetched == [[b.service.id]]  # the other services are in the overlap, unchanged
        assert b.service.disabled and b.service.disabled_reason == "maintenance"
        fetched.clear()
        await cache.refresh()  # the changed row is in the overlap now, and already applied
        assert fetched == []
        await db.update_service(c1, "c1-b", disabled=False)
        await cache.refresh()
        assert fetched == [[b.service.id]] and not b.service.disabled
