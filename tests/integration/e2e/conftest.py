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

import pytest
import pytest_asyncio

from tests.support.cloud import SeededStack, cloud_plan, seeded_cloud
from tests.support.nova_db import Backend
from tests.support.nova_db_mysql import MysqlNovaDB
from tests.support.oslo_caller import OsloSchedulerClient
from tests.support.placement_server import PlacementServer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seeded(
    placement_server: PlacementServer,
    db_backend: Backend,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[SeededStack]:
    hosts, aggs = cloud_plan()
    prefix = "asyncsched_e2e"
    mysql_db = (
        MysqlNovaDB(tmp_path_factory.getbasetemp() / "nova-manage-mysql", prefix=prefix)
        if db_backend == "mysql"
        else None
    )
    async with seeded_cloud(prefix, placement_server, hosts, aggs, n_cells=2, db=mysql_db) as (
        db,
        cloud,
    ):
        yield SeededStack(db, placement_server, cloud)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(module_amqp_url: str) -> AsyncIterator[OsloSchedulerClient]:
    """nova-conductor's side: the real oslo.messaging RPCClient on the module's vhost."""
    c = OsloSchedulerClient(module_amqp_url, timeout=120.0, call_monitor_timeout=30.0)
    try:
        yield c
    finally:
        c.close()
