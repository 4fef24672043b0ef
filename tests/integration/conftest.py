"""The real peers every integration test may ask for, defined once.

RabbitMQ: a throwaway vhost per test (``vhost``/``amqp_url``) or per module
(``module_vhost``/``module_amqp_url``, for a stack that lives as long as the module). PostgreSQL:
``nova_db``, an API + cell0 + two cell databases per test. Placement: ``placement_server``, the
real openstack-placement per module. Everything is uuid-named and removed afterwards; the
helpers themselves live in ``tests/support`` so the demo and the benchmarks use them too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.support import broker
from tests.support.nova_db import NovaDB
from tests.support.placement_server import PlacementServer


@pytest.fixture
def vhost() -> Iterator[str]:
    with broker.throwaway_vhost("asyncsched-test") as name:
        yield name


@pytest.fixture
def amqp_url(vhost: str) -> str:
    return broker.amqp_url(vhost)


@pytest.fixture(scope="module")
def module_vhost() -> Iterator[str]:
    with broker.throwaway_vhost("asyncsched-module") as name:
        yield name


@pytest.fixture(scope="module")
def module_amqp_url(module_vhost: str) -> str:
    return broker.amqp_url(module_vhost)


@pytest_asyncio.fixture
async def nova_db() -> AsyncIterator[NovaDB]:
    """API DB + cell0 + two cell DBs in the real PostgreSQL, dropped afterwards."""
    db = NovaDB()
    try:
        await db.create(n_cells=2)
        yield db
    finally:
        await db.drop()


@pytest.fixture(scope="module")
def placement_server() -> Iterator[PlacementServer]:
    """A real Placement for the whole test module (own database, torn down after)."""
    server = PlacementServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
