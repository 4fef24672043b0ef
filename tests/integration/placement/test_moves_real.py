"""Move claims and redeliveries against the real Placement and real nova cell databases.

An evacuated instance still holds its allocation on the dead source: the claim merges it, as
nova's report client does, and the answer is never the source. A redelivered call (its first
process claimed and died unacked) is answered with the host its first claim holds, and
nothing is claimed twice. The cache reads a real nova cell database; Placement is the real
service; the scheduler is SchedulerManager over the real PlacementClient.
"""

from __future__ import annotations

import dataclasses
import uuid as uuidlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from asyncsched.conf.options import Config
from asyncsched.objects.models import Destination, Flavor, RequestContext, RequestSpec
from asyncsched.placement.client import PlacementClient
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.cache import HostStateCache
from tests.support.nova_db import NodeSpec, NovaDB
from tests.support.placement_server import PlacementServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

CTX = RequestContext(request_id="req-move", user_id="demo", project_id="demo")
FLAVOR = Flavor(memory_mb=512, vcpus=1, root_gb=1, name="m1.tiny")
SMALL = {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1}


@dataclasses.dataclass
class Cloud:
    cfg: Config
    nodes: dict[str, str]  # host name -> compute node uuid (= its Placement root provider)
    server: PlacementServer

    def host_of(self, rp: str) -> str:
        return next(h for h, u in self.nodes.items() if u == rp)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cloud(placement_server: PlacementServer) -> AsyncIterator[Cloud]:
    """Four hosts in one cell, in nova's database and in Placement under the same uuids
    (shared by the module's tests: each uses its own instances, a small part of the room)."""
    db = NovaDB()
    try:
        await db.create(n_cells=1)
        cell = db.cells[0]
        tag = uuidlib.uuid4().hex[:6]
        nodes: dict[str, str] = {}
        async with placement_server.seeder() as s:
            for i in range(4):
                name = f"mv{i}-{tag}"
                node = await db.add_host(cell, NodeSpec(host=name))
                nodes[name] = await s.compute_node(name, uuid=node)
        cfg = dataclasses.replace(
            db.config(refresh_interval=3600), placement=placement_server.options
        )
        yield Cloud(cfg, nodes, placement_server)
    finally:
        await db.drop()


async def scheduler(cloud: Cloud) -> AsyncIterator[SchedulerManager]:
    async with (
        HostStateCache(cloud.cfg) as cache,
        PlacementClient(cloud.server.options, claim_backoff=0.05) as client,
    ):
        yield SchedulerManager(cloud.cfg, cache, client)


async def select(cloud: Cloud, spec: RequestSpec, instance: str) -> str:
    """One select_destinations by a fresh process (own cache and client): the chosen host."""
    async for mgr in scheduler(cloud):
        [[sel]] = await mgr.select_destinations(CTX, spec, [instance], True, False)
        return sel.service_host
    raise AssertionError("unreachable")


async def holds(cloud: Cloud, instance: str) -> dict[str, dict[str, int]]:
    async with cloud.server.seeder() as s:
        got = await s.allocations(instance)
    return {cloud.host_of(rp): dict(a["resources"]) for rp, a in got["allocations"].items()}


async def claim_on(cloud: Cloud, host: str, instance: str) -> None:
    """What nova left in Placement for an instance running on ``host``."""
    async with PlacementClient(cloud.server.options) as client:
        ar = {"allocations": {cloud.nodes[host]: {"resources": dict(SMALL)}}}
        assert await client.claim(instance, ar, project_id="demo", user_id="demo")


def spec(instance: str, **kw: Any) -> RequestSpec:
    return RequestSpec(
        flavor=FLAVOR,
        num_instances=1,
        project_id="demo",
        user_id="demo",
        instance_uuid=instance,
        **kw,
    )


@pytest.mark.parametrize("named", [False, True], ids=["scheduler-chosen", "named-host"])
async def test_evacuate_merges_the_source_and_never_answers_it(cloud: Cloud, named: bool) -> None:
    src, *others = sorted(cloud.nodes)
    instance = str(uuidlib.uuid4())
    await claim_on(cloud, src, instance)
    kw: dict[str, Any] = {"ignore_hosts": (src,)}
    if named:
        kw["requested_destination"] = Destination(host=others[2])
    dest = await select(cloud, spec(instance, **kw), instance)
    assert dest != src and (not named or dest == others[2])
    assert await holds(cloud, instance) == {src: SMALL, dest: SMALL}  # nova's doubled-up claim


async def test_redelivered_evacuate_answers_its_first_claim_and_claims_nothing_more(
    cloud: Cloud,
) -> None:
    src = sorted(cloud.nodes)[0]
    instance = str(uuidlib.uuid4())
    await claim_on(cloud, src, instance)
    evac = spec(instance, ignore_hosts=(src,))
    first = await select(cloud, evac, instance)  # this process "dies" unacked
    again = await select(cloud, evac, instance)  # another process gets the redelivery
    assert again == first != src
    assert await holds(cloud, instance) == {src: SMALL, first: SMALL}


async def test_redelivered_boot_adopts_and_excluded_hosts_are_never_answered(
    cloud: Cloud,
) -> None:
    instance = str(uuidlib.uuid4())
    first = await select(cloud, spec(instance), instance)
    assert await select(cloud, spec(instance), instance) == first  # adopted
    assert await holds(cloud, instance) == {first: SMALL}
    # the same redelivery excluding that host: never answered with it
    other = await select(cloud, spec(instance, ignore_hosts=(first,)), instance)
    assert other != first
