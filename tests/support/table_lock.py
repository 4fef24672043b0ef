"""A nova table locked against every other session, on PostgreSQL or MariaDB: what a long
migration or a stuck writer does to the scheduler's reads (they hang until it is released).

PostgreSQL: ``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE`` in an open transaction. MariaDB:
``LOCK TABLES ... WRITE`` (other sessions can neither read nor write it). The holder may still
write the table (``execute``, asyncpg's ``$n`` placeholders on both); ``release`` ends the lock
and makes those writes visible.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import asyncpg

from tests.support.mysql import MysqlConnection
from tests.support.nova_db import CellDB, NovaDB
from tests.support.nova_db_mysql import is_mysql


class TableLock(Protocol):
    async def execute(self, sql: str, *args: Any) -> Any: ...


@asynccontextmanager
async def table_locked(db: NovaDB, cell: CellDB, table: str) -> AsyncIterator[TableLock]:
    """``table`` of ``cell`` locked until the block ends (writes made through the lock are
    committed then, also when the block raises)."""
    if is_mysql(db):
        conn = MysqlConnection(cell.dbname)
        try:
            await conn.execute(f"LOCK TABLES {table} WRITE")
            try:
                yield conn
            finally:
                await conn.execute("UNLOCK TABLES")
        finally:
            conn.close()
        return
    blocker = await asyncpg.connect(cell.dsn)
    try:
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        try:
            yield blocker
        finally:
            await tx.commit()
    finally:
        await blocker.close()
