"""The real peers every integration test may ask for, defined once.

RabbitMQ: a throwaway vhost per test (``vhost``/``amqp_url``) or per module
(``module_vhost``/``module_amqp_url``, for a stack that lives as long as the module). Databases:
``nova_db``, an API + cell0 + two cell databases per test. Placement: ``placement_server``, the
real openstack-placement per module. Everything is uuid-named and removed afterwards; the
helpers themselves live in ``tests/support`` so the demo and the benchmarks use them too.

``db_backend`` says which server holds nova's and Placement's databases: ``postgresql`` unless
a module parametrizes it, e.g. ``pytestmark = pytest.mark.parametrize("db_backend", BACKENDS,
scope="module")`` (``tests.support.nova_db.BACKENDS``) to run on PostgreSQL and MariaDB alike.
On MariaDB the schema is nova 34's own, made by ``nova-manage`` into template databases
(``tests/support/nova_db_mysql.py``) that each test's databases copy.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from tests.support import broker
from tests.support.nova_db import Backend, NovaDB
from tests.support.nova_db_mysql import MysqlNovaDB
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


@pytest.fixture(scope="module")
def db_backend() -> Backend:
    """Which database server nova's and Placement's databases are on (parametrize to change)."""
    return "postgresql"


@pytest_asyncio.fixture
async def nova_db(
    db_backend: Backend, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[NovaDB]:
    """API DB + cell0 + two cell DBs in the real PostgreSQL or MariaDB, dropped afterwards."""
    db = (
        MysqlNovaDB(tmp_path_factory.getbasetemp() / "nova-manage-mysql")
        if db_backend == "mysql"
        else NovaDB()
    )
    try:
        await db.create(n_cells=2)
        yield db
    finally:
        await db.drop()


@pytest.fixture(scope="module")
def placement_server(db_backend: Backend) -> Iterator[PlacementServer]:
    """A real Placement for the whole test module (own database, torn down after)."""
    server = PlacementServer(db_backend=db_backend)
    server.start()
    try:
        yield server
    finally:
        server.stop()
