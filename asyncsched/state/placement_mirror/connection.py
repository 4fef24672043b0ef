"""The mirror's one connection to Placement's database, on PostgreSQL or MySQL/MariaDB.

Both give the reader the same calls: ``fetch`` (rows), ``arrays`` (an "array" answer of
``sql.py``'s contracts as numpy arrays, whatever form the dialect sent it in) and
``snapshot()`` (one read-only REPEATABLE READ transaction: every read of a refresh sees one
instant of Placement). ``sql`` is the dialect's statements (``statements.py``).

PostgreSQL: asyncpg, arrays in ``array_send``'s binary form (``binary.py``), JIT off (the
same queries every 0.5 s: compiling them costs more than it saves). MySQL/MariaDB: asyncmy,
sessions as ``state/db_mysql.py`` makes them (``ANSI_QUOTES``, autocommit outside the
snapshot), ``group_concat_max_len`` at its maximum, arrays as one ``GROUP_CONCAT`` text behind
its ``COUNT(*)``; ``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

import asyncmy
import asyncpg
import numpy as np

from asyncsched.conf.dsn import DatabaseURL
from asyncsched.state.db_mysql import bind, connect_kwargs
from asyncsched.state.placement_mirror.binary import ArrayFormatError, Int64s, arrays
from asyncsched.state.placement_mirror.statements import MYSQL, POSTGRESQL, MirrorSQL

_PG_SESSION = {"jit": "off"}
_MY_SESSION = "SET SESSION group_concat_max_len = 1073741824"  # MariaDB's maximum


class MirrorConnection(Protocol):
    sql: MirrorSQL

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...

    async def arrays(self, query: str, sizes: tuple[int, ...], *args: Any) -> list[Int64s]: ...

    def snapshot(self) -> AbstractAsyncContextManager[None]: ...

    def is_closed(self) -> bool: ...

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


async def connect(url: DatabaseURL, *, host: int, connect_timeout: float) -> MirrorConnection:
    """A connection to ``url`` (its ``host``-th address where it names several)."""
    if url.dialect == "mysql":
        kw = connect_kwargs(url, host, connect_timeout)
        conn = await asyncmy.connect(**kw)
        async with conn.cursor() as cur:
            await cur.execute(_MY_SESSION)
        return MysqlMirrorConnection(conn)
    pg = await asyncpg.connect(
        url.asyncpg_dsn,
        statement_cache_size=16,
        server_settings=_PG_SESSION,
        timeout=connect_timeout,
    )
    return PgMirrorConnection(pg)


class PgMirrorConnection:
    sql = POSTGRESQL

    def __init__(self, conn: asyncpg.Connection) -> None:
        self._conn = conn

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        return list(await self._conn.fetch(query, *args))

    async def arrays(self, query: str, sizes: tuple[int, ...], *args: Any) -> list[Int64s]:
        row = await self._conn.fetchrow(query, *args)
        return arrays(tuple(row), sizes)

    def snapshot(self) -> AbstractAsyncContextManager[None]:
        tx: AbstractAsyncContextManager[None] = self._conn.transaction(
            isolation="repeatable_read", readonly=True
        )
        return tx

    def is_closed(self) -> bool:
        return bool(self._conn.is_closed())

    async def close(self) -> None:
        await self._conn.close()

    def terminate(self) -> None:
        self._conn.terminate()


class MysqlMirrorConnection:
    sql = MYSQL

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def fetch(self, query: str, *args: Any) -> list[Any]:
        text, bound = bind(query, args)
        async with self._conn.cursor() as cur:
            await cur.execute(text, bound)
            return list(await cur.fetchall())

    async def arrays(self, query: str, sizes: tuple[int, ...], *args: Any) -> list[Int64s]:
        rows = await self.fetch(query, *args)
        if query == MYSQL.allocations_all:  # rows (sql_mysql.py: the packet limit)
            table = np.array(rows, dtype=np.int64).reshape(len(rows), len(sizes))
            return [table[:, i].copy() for i in range(len(sizes))]
        if len(rows) != 1 or len(rows[0]) != 2:
            raise ArrayFormatError("not one row of a count and a list")
        count, text = int(rows[0][0]), rows[0][1]
        flat = _numbers(text)
        if len(flat) != count * len(sizes):
            raise ArrayFormatError("a list shorter than its count (group_concat_max_len?)")
        table = flat.reshape(count, len(sizes))
        return [table[:, i].copy() for i in range(len(sizes))]

    @asynccontextmanager
    async def snapshot(self) -> AsyncIterator[None]:
        async with self._conn.cursor() as cur:
            await cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
        try:
            yield
        finally:
            await self._conn.rollback()  # nothing written: ending it is all

    def is_closed(self) -> bool:
        return not bool(self._conn.connected)

    async def close(self) -> None:
        await self._conn.ensure_closed()

    def terminate(self) -> None:
        self._conn.close()


def _numbers(text: str | bytes | None) -> Int64s:
    """Decimal numbers joined by commas (NULL: none) as int64. They are never negative (ids,
    generations, CRC32s, amounts), and 64-bit words come unsigned from MySQL: read as
    unsigned, they are the same bits signed, as PostgreSQL's int8."""
    if text is None:
        return np.empty(0, dtype=np.int64)
    if isinstance(text, bytes):
        text = text.decode("ascii")
    if not text:
        return np.empty(0, dtype=np.int64)
    try:
        values = np.fromstring(text, dtype=np.uint64, sep=",")
    except ValueError:
        raise ArrayFormatError("not a list of numbers") from None
    if len(values) != text.count(",") + 1:
        raise ArrayFormatError("not a list of numbers")
    out: Int64s = values.view(np.int64)
    return out
