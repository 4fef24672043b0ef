"""End to end, in process: the daemon as ``asyncsched serve`` wires it (build_daemon + Service),
called through the real oslo.messaging RPCClient exactly as nova-conductor calls it, over real
RabbitMQ, with the host state read from real nova databases in PostgreSQL and the claims made
in the real Placement. See conftest.cloud_plan() for the seeded cloud.

The tests share one seeded cloud and one daemon (seeding is the slow part); each uses its own
instance uuids, AZ or hosts, so what one books does not change what another asserts.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import oslo_messaging
import pytest
import pytest_asyncio

from asyncsched.app import Daemon, build_daemon
from asyncsched.conf.loader import ConfigSources, load
from asyncsched.objects.models import Aggregate, InstanceGroup, Selection
from asyncsched.service import Service
from tests.support import broker
from tests.support.cloud import (
    Cloud,
    SeededStack,
    config_file_text,
    daemon_config,
    decode_reply,
)
from tests.support.e2e_checks import allocations, check_allocations, check_selections
from tests.support.oslo_caller import (
    OsloSchedulerClient,
    fake_nova_exception,
    request_spec,
    request_spec_primitive,
)
from tests.support.placement_server import PlacementServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

FILTERS = (
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "SameHostFilter",
    "DifferentHostFilter",
    "AggregateInstanceExtraSpecsFilter",
)
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
AZ1 = [f"c{c}-{i:02d}" for c in (1, 2) for i in range(14)]


@dataclass(frozen=True, slots=True)
class Stack:
    seeded: SeededStack
    daemon: Daemon
    service: Service
    client: OsloSchedulerClient
    config_path: Path

    @property
    def cloud(self) -> Cloud:
        return self.seeded.cloud

    @property
    def placement(self) -> PlacementServer:
        return self.seeded.placement


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    seeded: SeededStack, module_amqp_url: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    config = daemon_config(
        transport_url=module_amqp_url,
        api_url=seeded.db.api_url,
        placement=seeded.placement.options,
        scheduler_host=f"e2e-{uuid.uuid4().hex[:8]}",
        enabled_filters=FILTERS,
        # No background refresh during the module: what changes the cache is the cast or the
        # explicit refresh a test asks for.
        refresh_interval=3600.0,
        full_resync_interval=3600.0,
        drain_timeout=10.0,
    )
    path = tmp_path_factory.mktemp("e2e") / "asyncsched.conf"
    path.write_text(config_file_text(config))
    config = load(ConfigSources.of([str(path)])).config  # exactly what `serve` would read
    daemon = build_daemon(config)
    service = Service(config, daemon.components, None, [str(path)])
    await service.start()
    client = OsloSchedulerClient(module_amqp_url, timeout=60.0, call_monitor_timeout=30.0)
    try:
        yield Stack(seeded, daemon, service, client, path)
    finally:
        client.close()
        await service.stop()


# --- helpers ---------------------------------------------------------------------------------


def new_uuids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def spec_primitive(n: int, **kw: Any) -> dict[str, Any]:
    kw.setdefault("memory_mb", SMALL["MEMORY_MB"])
    kw.setdefault("vcpus", SMALL["VCPU"])
    kw.setdefault("root_gb", SMALL["DISK_GB"])
    kw.setdefault("group_policy", None)
    kw.setdefault("availability_zone", "az1")
    return request_spec_primitive(num_instances=n, **kw)


async def boot(stack: Stack, uuids: Sequence[str], spec: Mapping[str, Any]) -> Any:
    return await asyncio.to_thread(stack.client.select_destinations, spec, list(uuids))


async def boot_ok(stack: Stack, uuids: Sequence[str], **kw: Any) -> list[list[Selection]]:
    return decode_reply(await boot(stack, uuids, spec_primitive(len(uuids), **kw)))


async def expect_no_valid_host(stack: Stack, uuids: Sequence[str], **kw: Any) -> Exception:
    with fake_nova_exception() as nova_exc:
        with pytest.raises(nova_exc.NoValidHost) as info:
            await boot(stack, uuids, spec_primitive(len(uuids), **kw))
    return cast(Exception, info.value)


# --- boots through the real client ------------------------------------------------------------


@pytest.mark.parametrize("count", [1, 10, 100])
async def test_boot_selections_and_claims(stack: Stack, count: int) -> None:
    uuids = new_uuids(count)
    sels = await boot_ok(stack, uuids)
    check_selections(stack.cloud, sels, uuids, AZ1, az="az1")
    await check_allocations(stack.placement, sels, uuids, SMALL)
    if count > 1:  # the RAM weigher sees each placement: a batch spreads, never piles up
        per_host: dict[str, int] = {}
        for s in sels:
            per_host[s[0].service_host] = per_host.get(s[0].service_host, 0) + 1
        assert len(per_host) >= min(count, 6), per_host


async def test_capacity_respected_and_failed_batch_rolled_back(stack: Stack) -> None:
    """az-cap: 4 hosts with room for exactly two 4 GiB instances each (Placement's view)."""
    big = {"VCPU": 1, "MEMORY_MB": 4096, "DISK_GB": 20}
    cap_hosts = [f"cap-{i}" for i in range(4)]
    kw = {"availability_zone": "az-cap", "memory_mb": 4096}

    too_many = new_uuids(9)  # one more than fits: fails after 8 claims, all rolled back
    await expect_no_valid_host(stack, too_many, **kw)
    found = await allocations(stack.placement, too_many)
    assert all(a["allocations"] == {} for a in found.values()), found

    fits = new_uuids(8)
    sels = await boot_ok(stack, fits, **kw)
    check_selections(stack.cloud, sels, fits, cap_hosts, az="az-cap")
    await check_allocations(stack.placement, sels, fits, big)
    per_host: dict[str, int] = {}
    for s in sels:
        per_host[s[0].service_host] = per_host.get(s[0].service_host, 0) + 1
    assert per_host == {h: 2 for h in cap_hosts}
    async with stack.placement.seeder() as seeder:
        for h in cap_hosts:
            usage = await seeder.usages(stack.cloud.hosts[h].uuid)
            assert usage["MEMORY_MB"] == 8192

    one_more = new_uuids(1)
    await expect_no_valid_host(stack, one_more, **kw)
    assert (await allocations(stack.placement, one_more))[one_more[0]]["allocations"] == {}


async def test_impossible_flavor_is_no_valid_host_with_no_allocations(stack: Stack) -> None:
    uuids = new_uuids(3)
    exc = await expect_no_valid_host(stack, uuids, memory_mb=10_000_000)
    assert "No valid host was found" in str(exc)
    found = await allocations(stack.placement, uuids)
    assert all(a["allocations"] == {} for a in found.values()), found
    # Without nova.exception on the caller side oslo hands back a RemoteError, as documented.
    with pytest.raises(oslo_messaging.RemoteError) as info:
        await boot(stack, uuids, spec_primitive(3, memory_mb=10_000_000))
    assert info.value.exc_type == "NoValidHost"


async def test_anti_affinity_multi_create_lands_on_distinct_hosts(stack: Stack) -> None:
    uuids = new_uuids(6)
    group = InstanceGroup(
        uuid=str(uuid.uuid4()),
        id=11,
        name="anti",
        policy="anti-affinity",
        policies=("anti-affinity",),
        members=tuple(uuids),
        hosts=(),
        rules={},
    )
    spec = request_spec(
        num_instances=6,
        memory_mb=2048,
        vcpus=1,
        root_gb=20,
        group_policy=None,
        availability_zone="az1",
    )
    spec = replace(spec, instance_group=group, scheduler_hints={"group": (group.uuid,)})
    sels = decode_reply(await boot(stack, uuids, request_spec_primitive(spec)))
    hosts = [s[0].service_host for s in sels]
    assert len(set(hosts)) == 6, hosts
    check_selections(stack.cloud, sels, uuids, AZ1, az="az1")
    await check_allocations(stack.placement, sels, uuids, SMALL)


async def test_disabled_and_down_services_are_not_chosen(stack: Stack) -> None:
    """az-maint holds a disabled giant, a forced-down giant and one small healthy host; the
    weighers would prefer the giants, Placement offers all three, ComputeFilter drops two."""
    first = new_uuids(1)
    sels = await boot_ok(stack, first, availability_zone="az-maint")
    assert [s.service_host for s in sels[0]] == ["maint-ok"]  # and no alternate in its cell
    await check_allocations(stack.placement, sels, first, SMALL)
    # Two 12 GB instances: maint-ok takes one, only the giants have room for the second.
    two = new_uuids(2)
    await expect_no_valid_host(stack, two, availability_zone="az-maint", memory_mb=12000)
    assert all(a["allocations"] == {} for a in (await allocations(stack.placement, two)).values())


async def wait_until(predicate: Any, what: str, within: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


async def test_fanout_aggregate_casts_change_decisions(stack: Stack) -> None:
    """nova-api's update_aggregates / delete_aggregate casts reach the cache and steer the next
    decision: an extra-spec-matched aggregate and a new AZ on the spare host."""
    agg = Aggregate(
        id=9000 + uuid.uuid4().int % 1000,
        uuid=str(uuid.uuid4()),
        name=f"ssd-{uuid.uuid4().hex[:6]}",
        hosts=("spare",),
        metadata={"ssd": "true", "availability_zone": "az-ssd"},
    )
    ssd = {
        "flavor": replace(
            request_spec().flavor,
            memory_mb=2048,
            vcpus=1,
            root_gb=20,
            extra_specs={"aggregate_instance_extra_specs:ssd": "true"},
        ),
        "availability_zone": None,
    }
    before = new_uuids(1)
    await expect_no_valid_host(stack, before, **ssd)

    await asyncio.to_thread(stack.client.update_aggregates, [agg])
    await wait_until(
        lambda: any(a.uuid == agg.uuid for a in stack.daemon.cache.aggregates()), "the cast"
    )
    after = new_uuids(2)
    sels = await boot_ok(stack, after, **ssd)
    assert [[s.service_host for s in per] for per in sels] == [["spare"], ["spare"]]
    assert {per[0].availability_zone for per in sels} == {"az-ssd"}
    await check_allocations(stack.placement, sels, after, SMALL)

    # The AZ of the cast, through the pre-filter: nova-api also mirrors the aggregate into
    # Placement, so member_of finds the spare host's provider.
    spare = stack.cloud.hosts["spare"]
    async with stack.placement.seeder() as seeder:
        status, body = await seeder.call("GET", f"/resource_providers/{spare.uuid}/aggregates")
        assert status == 200
        await seeder.call(
            "PUT",
            f"/resource_providers/{spare.uuid}/aggregates",
            {
                "aggregates": [*body["aggregates"], agg.uuid],
                "resource_provider_generation": body["resource_provider_generation"],
            },
        )
    in_az = new_uuids(1)
    sels = await boot_ok(stack, in_az, availability_zone="az-ssd")
    assert sels[0][0].service_host == "spare" and sels[0][0].availability_zone == "az-ssd"

    await asyncio.to_thread(stack.client.delete_aggregate, agg)
    await wait_until(
        lambda: all(a.uuid != agg.uuid for a in stack.daemon.cache.aggregates()), "the delete"
    )
    await expect_no_valid_host(stack, new_uuids(1), **ssd)


async def test_fanout_instance_info_casts_change_decisions(stack: Stack) -> None:
    """A compute's update_instance_info cast tells the scheduler where an instance runs, which
    SameHostFilter then uses; delete_instance_info takes it back."""
    vm = str(uuid.uuid4())
    hint = {"hints": {"same_host": [vm]}}
    await expect_no_valid_host(stack, new_uuids(1), **hint)

    await asyncio.to_thread(stack.client.update_instance_info, "c2-06", [vm])
    target = stack.daemon.cache.get_by_host_node("c2-06")[0]
    await wait_until(lambda: vm in target.instances, "the instance-info cast")
    uuids = new_uuids(1)
    sels = await boot_ok(stack, uuids, **hint)
    assert sels[0][0].service_host == "c2-06"
    await check_allocations(stack.placement, sels, uuids, SMALL)

    await asyncio.to_thread(stack.client.delete_instance_info, "c2-06", vm)
    await wait_until(lambda: vm not in target.instances, "the delete cast")
    await expect_no_valid_host(stack, new_uuids(1), **hint)


async def test_sighup_reload_reaches_the_scheduler(stack: Stack) -> None:
    """Reloading a config without SameHostFilter makes the same request schedulable."""
    original = stack.config_path.read_text()
    hint = {"hints": {"same_host": [str(uuid.uuid4())]}}
    await expect_no_valid_host(stack, new_uuids(1), **hint)
    try:
        stack.config_path.write_text(
            original.replace(",SameHostFilter", "").replace("host_subset_size = 1", "")
            + "[filter_scheduler]\nhost_subset_size = 2\n"
        )
        assert await stack.service.reload()
        health = stack.service.health()["components"]["scheduler"]
        assert "SameHostFilter" not in health["filters"]
        assert health["host_subset_size"] == 2
        uuids = new_uuids(1)
        sels = await boot_ok(stack, uuids, **hint)
        await check_allocations(stack.placement, sels, uuids, SMALL)
    finally:
        stack.config_path.write_text(original)
        assert await stack.service.reload()
    assert "SameHostFilter" in stack.service.health()["components"]["scheduler"]["filters"]


async def test_cell_database_outage_schedules_from_cache_and_reports_stale(
    stack: Stack,
) -> None:
    db, cell2 = stack.seeded.db, stack.seeded.db.cells[1]
    assert stack.service.health()["components"]["hoststate"]["stale"] is False
    await db.take_cell_away(cell2)
    try:
        await stack.daemon.cache.refresh()
        health = stack.service.health()["components"]
        assert health["hoststate"]["stale"] is True
        assert health["hoststate"]["cells"][cell2.uuid]["stale"] is True
        assert health["scheduler"]["host_state_stale"] is True
        uuids = new_uuids(20)
        sels = await boot_ok(stack, uuids)
        check_selections(stack.cloud, sels, uuids, AZ1, az="az1")
        await check_allocations(stack.placement, sels, uuids, SMALL)
        assert any(s[0].cell_uuid == cell2.uuid for s in sels)  # its hosts still schedulable
    finally:
        await db.bring_cell_back(cell2)
    await stack.daemon.cache.refresh()
    assert stack.service.health()["components"]["hoststate"]["stale"] is False


async def test_dead_placement_fails_fast_with_no_valid_host(stack: Stack) -> None:
    """Placement killed: the caller gets NoValidHost (within the call timeout, no hang), the
    daemon stays up and schedules again once Placement is back."""
    stack.placement.kill()
    try:
        with fake_nova_exception() as nova_exc:
            with pytest.raises(nova_exc.NoValidHost):
                await asyncio.to_thread(
                    stack.client.select_destinations, spec_primitive(1), new_uuids(1), timeout=20.0
                )
        health = stack.service.health()["components"]["placement"]
        assert health["last_error"]
    finally:
        stack.placement.respawn()
    uuids = new_uuids(1)
    sels = await boot_ok(stack, uuids)
    await check_allocations(stack.placement, sels, uuids, SMALL)


async def test_chance_driver_end_to_end(stack: Stack) -> None:
    """[asyncsched] driver = chance: random up hosts, still claimed in Placement, through the
    same wiring and the real client (its own vhost, so the main daemon does not answer)."""
    vhost = f"asyncsched-e2e-chance-{uuid.uuid4().hex[:8]}"
    url = broker.amqp_url(vhost)
    service: Service | None = None
    client: OsloSchedulerClient | None = None
    try:
        await asyncio.to_thread(broker.add_vhost, vhost)
        config = daemon_config(
            transport_url=url,
            api_url=stack.seeded.db.api_url,
            placement=stack.placement.options,
            scheduler_host="e2e-chance",
            driver="chance",
        )
        daemon = build_daemon(config)
        service = Service(config, daemon.components)
        await service.start()
        client = OsloSchedulerClient(url, timeout=60.0)
        uuids = new_uuids(8)
        sels = decode_reply(
            await asyncio.to_thread(client.select_destinations, spec_primitive(8), uuids)
        )
        assert service.health()["components"]["scheduler"]["driver"] == "chance"
        for per_instance in sels:
            for sel in per_instance:
                seeded = stack.cloud.hosts[sel.service_host]
                assert sel.service_host not in ("maint-disabled", "maint-down")
                assert sel.compute_node_uuid == seeded.uuid
                assert sel.cell_uuid == seeded.cell_uuid == per_instance[0].cell_uuid
            assert len(per_instance) <= 3
        await check_allocations(stack.placement, sels, uuids, SMALL)
    finally:
        if client is not None:
            client.close()
        if service is not None:
            await service.stop()
        await asyncio.to_thread(broker.delete_vhost, vhost)
