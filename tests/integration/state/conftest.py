"""The host-state tests run on nova's databases in PostgreSQL and in MariaDB (issue #25).

``nova_db`` here is parametrized: the same test, the same seeding helpers, once on each. The
MariaDB schema is nova 34's own (``nova-manage``, made once into template databases).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from tests.support.nova_db import NovaDB
from tests.support.nova_db_mysql import MysqlNovaDB


@pytest_asyncio.fixture(params=["postgresql", "mysql"])
async def nova_db(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[NovaDB]:
    """API DB + cell0 + two cell DBs, in PostgreSQL or MariaDB, dropped afterwards."""
    if request.param == "mysql":
        db: NovaDB = MysqlNovaDB(tmp_path_factory.getbasetemp() / "nova-manage-mysql")
    else:
        db = NovaDB()
    try:
        await db.create(n_cells=2)
        yield db
    finally:
        await db.drop()


@pytest_asyncio.fixture
async def mysql_db(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[MysqlNovaDB]:
    """The MariaDB ``nova_db`` alone, for what only MySQL has (a Galera address list)."""
    db = MysqlNovaDB(tmp_path_factory.getbasetemp() / "nova-manage-mysql")
    try:
        await db.create(n_cells=2)
        yield db
    finally:
        await db.drop()
