"""The host-state tests run on nova's databases in PostgreSQL and in MariaDB (issue #25).

``db_backend`` is parametrized here for the whole directory: ``nova_db`` (tests/integration/
conftest.py) is the same seeding helpers on either, the MariaDB schema nova 34's own
(``nova-manage``, made once into template databases). Module scope: each module runs on one
server, then on the other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.nova_db import BACKENDS, Backend
from tests.support.nova_db_mysql import MysqlNovaDB


@pytest.fixture(scope="module", params=BACKENDS)
def db_backend(request: pytest.FixtureRequest) -> Backend:
    backend: Backend = request.param
    return backend


@pytest_asyncio.fixture
async def mysql_db(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MysqlNovaDB]:
    """The MariaDB ``nova_db`` alone, for what only MySQL has (a Galera address list)."""
    db = MysqlNovaDB(tmp_path_factory.getbasetemp() / "nova-manage-mysql")
    try:
        await db.create(n_cells=2)
        yield db
    finally:
        await db.drop()
