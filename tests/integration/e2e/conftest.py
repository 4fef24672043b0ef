"""The real stack for the end-to-end tests, one per test module.

Real RabbitMQ (``module_amqp_url`` of tests/integration/conftest.py: a throwaway vhost, the
``scheduler`` queue name is fixed by nova, so modules running side by side must not share one),
real PostgreSQL (NovaDB: API + cell0 + 2 cells with nova's tables), the real Placement
(``placement_server``, openstack-placement under gunicorn) seeded with providers that match the
compute nodes, and the real oslo.messaging RPCClient as nova-conductor uses it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.support.cloud import SeededStack, cloud_plan, seeded_cloud
from tests.support.oslo_caller import OsloSchedulerClient
from tests.support.placement_server import PlacementServer


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def seeded(placement_server: PlacementServer) -> AsyncIterator[SeededStack]:
    hosts, aggs = cloud_plan()
    async with seeded_cloud("asyncsched_e2e", placement_server, hosts, aggs, n_cells=2) as (
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
