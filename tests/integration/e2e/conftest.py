"""The real stack for the end-to-end tests, one per test module.

Real RabbitMQ (``module_amqp_url`` of tests/integration/conftest.py: a throwaway vhost, the
``scheduler`` queue name is fixed by nova, so modules running side by side must not share one),
real PostgreSQL (NovaDB: API + cell0 + 2 cells with nova's tables) or, where a module
parametrizes ``db_backend``, MariaDB (nova-manage's schema), the real Placement
(``placement_server``, openstack-placement under gunicorn, on the same database server) seeded
with providers that match the compute nodes, and the real oslo.messaging RPCClient as
nova-conductor uses it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
import pytest_asyncio

from tests.support.cloud import AggregatePlan, Cloud, HostPlan, seed_cloud
from tests.support.nova_db import Backend, NovaDB
from tests.support.nova_db_mysql import MysqlNovaDB
from tests.support.oslo_caller import OsloSchedulerClient
from tests.support.placement_server import PlacementServer

# The e2e cloud: 28 general hosts of varied sizes in AZ az1 (14 per cell); 4 small hosts in
# az-cap that take exactly two 4 GiB instances each (8704 MB - 512 reserved); az-maint with a
# disabled and a forced-down giant next to one small healthy host; one spare host in no
# aggregate (default AZ) for the aggregate-cast test.
GENERAL_SIZES = [(16, 65536), (32, 131072), (48, 196608), (64, 262144)]


def cloud_plan() -> tuple[list[HostPlan], list[AggregatePlan]]:
    hosts: list[HostPlan] = []
    for cell in (0, 1):
        for i in range(14):
            vcpus, mem = GENERAL_SIZES[i % len(GENERAL_SIZES)]
            hosts.append(
                HostPlan(f"c{cell + 1}-{i:02d}", cell, vcpus, mem, 4000, aggregates=("az1",))
            )
    hosts += [HostPlan(f"cap-{i}", 1, 8, 8704, 1000, aggregates=("cap",)) for i in range(4)]
    hosts += [
        HostPlan("maint-ok", 0, 8, 16384, 500, aggregates=("maint",)),
        HostPlan("maint-disabled", 0, 128, 1048576, 8000, aggregates=("maint",), disabled=True),
        HostPlan("maint-down", 0, 128, 1048576, 8000, aggregates=("maint",), forced_down=True),
        HostPlan("spare", 1, 16, 65536, 1000),
    ]
    aggs = [
        AggregatePlan("az1", availability_zone="az1"),
        AggregatePlan("cap", availability_zone="az-cap"),
        AggregatePlan("maint", availability_zone="az-maint"),
    ]
    return hosts, aggs


@dataclass(frozen=True, slots=True)
class SeededStack:
    db: NovaDB
    placement: PlacementServer
    cloud: Cloud


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seeded(
    placement_server: PlacementServer,
    db_backend: Backend,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[SeededStack]:
    db = (
        MysqlNovaDB(tmp_path_factory.getbasetemp() / "nova-manage-mysql", prefix="asyncsched_e2e")
        if db_backend == "mysql"
        else NovaDB(prefix="asyncsched_e2e")
    )
    try:
        await db.create(n_cells=2)
        hosts, aggs = cloud_plan()
        async with placement_server.seeder() as seeder:
            cloud = await seed_cloud(db, seeder, hosts, aggs)
        yield SeededStack(db, placement_server, cloud)
    finally:
        await db.drop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(module_amqp_url: str) -> AsyncIterator[OsloSchedulerClient]:
    """nova-conductor's side: the real oslo.messaging RPCClient on the module's vhost."""
    c = OsloSchedulerClient(module_amqp_url, timeout=120.0, call_monitor_timeout=30.0)
    try:
        yield c
    finally:
        c.close()
