"""The daemon with the mirror on, end to end: nova databases, the real Placement, RabbitMQ and
the real oslo.messaging client, wired by build_daemon from a config file that names
``[placement_database]`` as placement.conf does. Boots take the mirror path and are claimed
in Placement; a host filled behind the mirror's back is refused by Placement and the boot
lands elsewhere; a granular flavor takes the GET."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import pytest_asyncio

from asyncsched.app import Daemon, build_daemon
from asyncsched.conf.loader import ConfigSources, load
from asyncsched.scheduling.candidates.guard_usage import DatabaseUsage
from asyncsched.service import Service
from tests.support.cloud import (
    Cloud,
    HostPlan,
    config_file_text,
    daemon_config,
    decode_reply,
    seeded_cloud,
)
from tests.support.e2e_checks import allocations
from tests.support.mirror_role import ReadOnlyRole
from tests.support.oslo_caller import OsloSchedulerClient, request_spec, request_spec_primitive
from tests.support.placement_server import PlacementServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

FLAVOR: dict[str, Any] = {"vcpus": 2, "memory_mb": 2048, "root_gb": 20}


@dataclass(frozen=True, slots=True)
class Stack:
    daemon: Daemon
    client: OsloSchedulerClient
    cloud: Cloud
    placement: PlacementServer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    placement: PlacementServer,
    ro_role: ReadOnlyRole,
    module_amqp_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    plans = [HostPlan(f"m-{i}", 0, 4, 16384, 200) for i in range(5)]
    async with seeded_cloud("asyncsched_mirror", placement, plans, n_cells=1) as (db, cloud):
        config = daemon_config(
            transport_url=module_amqp_url,
            api_url=db.api_url,
            placement=placement.options,
            scheduler_host=f"mirror-{uuid.uuid4().hex[:8]}",
            refresh_interval=3600.0,
            full_resync_interval=3600.0,
            drain_timeout=10.0,
        )
        path = tmp_path_factory.mktemp("mirror") / "asyncsched.conf"
        path.write_text(
            config_file_text(config)
            + "placement_mirror_interval = 3600\n"  # only start-up and refused claims refresh
            + f"[placement_database]\nconnection = {ro_role.url}\nmax_pool_size = 5\n"
        )
        config = load(ConfigSources.of([str(path)])).config
        daemon = build_daemon(config)
        service = Service(config, daemon.components, None, [str(path)])
        await service.start()
        client = OsloSchedulerClient(module_amqp_url, timeout=60.0, call_monitor_timeout=30.0)
        try:
            yield Stack(daemon, client, cloud, placement)
        finally:
            client.close()
            await service.stop()


async def boot(stack: Stack, n: int, **kw: Any) -> tuple[list[str], Any]:
    uuids = [str(uuid.uuid4()) for _ in range(n)]
    spec = kw.pop("spec", None) or request_spec(num_instances=n, group_policy=None, **FLAVOR)
    reply = await asyncio.to_thread(
        stack.client.select_destinations, request_spec_primitive(spec), uuids
    )
    return uuids, decode_reply(reply)


async def test_boots_take_the_mirror_path_and_are_claimed(stack: Stack) -> None:
    cands = stack.daemon.candidates
    assert cands is not None and stack.daemon.mirror is not None
    assert stack.daemon.mirror.health()["providers"] == 5
    uuids, sels = await boot(stack, 4)
    assert cands.paths == {"mirror": 1}
    found = await allocations(stack.placement, uuids)
    for u, sel in zip(uuids, sels, strict=True):
        rp = sel[0].compute_node_uuid
        assert found[u]["allocations"][rp]["resources"] == {
            "VCPU": 2,
            "MEMORY_MB": 2048,
            "DISK_GB": 20,
        }
    assert len({s[0].service_host for s in sels}) == 4  # the weighers spread them
    # the overcommit guard confirmed each claim from Placement's database (read-only role)
    guard = stack.daemon.placement.guard
    assert guard is not None and isinstance(guard.usages, DatabaseUsage)
    assert (guard.usages.reads, guard.usages.fallbacks) == (4, 0)
    assert guard.stats.confirmed == 4


async def test_a_host_filled_behind_the_mirror_is_refused_and_the_boot_lands_elsewhere(
    stack: Stack,
) -> None:
    mirror, cands = stack.daemon.mirror, stack.daemon.candidates
    assert mirror is not None and cands is not None
    # Fill every host but one through Placement's API: the mirror (no background refresh
    # here) still shows them free, so the scheduler picks one and Placement refuses it.
    # The host kept free is a busy one, so the weighers prefer the (now full) idle hosts.
    async with stack.placement.seeder() as s:
        used = {h.uuid: (await s.usages(h.uuid)).get("VCPU", 0) for h in stack.cloud.hosts.values()}
        hosts = sorted(stack.cloud.hosts.values(), key=lambda h: used[h.uuid])
        keep = hosts[-1]
        assert used[keep.uuid] > used[hosts[0].uuid]
        for h in hosts[:-1]:
            free = h.plan.vcpus * 4 - used[h.uuid]
            status, _ = await s.call(
                "PUT",
                f"/allocations/{uuid.uuid4()}",
                {
                    "allocations": {h.uuid: {"resources": {"VCPU": free}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                },
            )
            assert status == 204
    refreshes = mirror.health()["refreshes"]
    uuids, sels = await boot(stack, 1)
    assert sels[0][0].compute_node_uuid == keep.uuid
    assert mirror.health()["on_demand_refreshes"] >= 1
    for _ in range(100):
        if mirror.health()["refreshes"] > refreshes:
            break
        await asyncio.sleep(0.05)
    state = mirror.state
    assert state is not None
    for h in hosts[:-1]:  # the refused claim made the mirror read Placement again
        p = state.providers[state.by_uuid[h.uuid]]
        assert p.used["VCPU"] == h.plan.vcpus * 4
    found = await allocations(stack.placement, uuids)
    assert list(found[uuids[0]]["allocations"]) == [keep.uuid]


async def test_a_granular_flavor_asks_placement(stack: Stack) -> None:
    cands = stack.daemon.candidates
    assert cands is not None
    spec = request_spec(num_instances=1, group_policy=None, vcpus=1, memory_mb=512, root_gb=1)
    flavor = replace(spec.flavor, extra_specs={**spec.flavor.extra_specs, "resources1:VCPU": "1"})
    before = cands.paths["placement"]
    uuids, sels = await boot(stack, 1, spec=replace(spec, flavor=flavor))
    assert cands.paths["placement"] == before + 1
    assert cands.reasons["granular request groups"] >= 1
    found = await allocations(stack.placement, uuids)
    assert found[uuids[0]]["allocations"][sels[0][0].compute_node_uuid]["resources"]["VCPU"] == 1
