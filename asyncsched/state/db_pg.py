"""PostgreSQL behind ``NovaDatabase``: one small asyncpg pool."""

from __future__ import annotations

from typing import Any

import asyncpg

from asyncsched.conf.dsn import DatabaseURL


async def _read_only_session(conn: asyncpg.Connection) -> None:
    """Nothing to reset: these sessions only read (no LISTEN, locks, cursors or settings).
    asyncpg's default reset is a round trip after every query, on the query's path."""


class PgPool:
    """The asyncpg pool of one database; records are asyncpg's."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    @classmethod
    async def open(cls, url: DatabaseURL, *, size: int, query_timeout: float) -> PgPool:
        pool = await asyncpg.create_pool(
            url.asyncpg_dsn,
            min_size=0,
            max_size=size,
            timeout=query_timeout,
            command_timeout=query_timeout,
            statement_cache_size=32,
            reset=_read_only_session,
        )
        return cls(pool)

    async def fetch(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        async with self._pool.acquire() as conn:
            return list(await conn.fetch(sql, *args))

    async def ping(self) -> None:
        async with self._pool.acquire() as conn:
            await conn.fetchval("SELECT 1")

    def terminate(self) -> None:
        self._pool.terminate()

    async def close(self) -> None:
        await self._pool.close()
