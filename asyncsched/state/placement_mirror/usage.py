"""One provider's capacity and usage, read fresh from Placement's database.

The overcommit guard asks this right after each claim. Through Placement's API that is one
or two more HTTP calls per claim, each a full WSGI request on Placement's own workers, which
halves the claim rate Placement can give; here it is one indexed query on a small pool of its
own (so it never waits behind a mirror refresh). Placement commits a claim before it answers
204, so a read that starts after the answer sees it.
"""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg

from asyncsched.exceptions import DatabaseUnavailable

# Per resource class of the provider's inventory: Placement's capacity inputs and the sum
# allocated (a class with allocations always has inventory: Placement refuses to delete it).
_USAGE = (
    "SELECT rc.name, i.total, i.reserved, i.allocation_ratio, "
    "COALESCE((SELECT SUM(a.used) FROM allocations a WHERE a.resource_provider_id = rp.id "
    "AND a.resource_class_id = i.resource_class_id), 0)::bigint "
    "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE rp.uuid = $1"
)

Capacity = dict[str, int]
Used = dict[str, int]


class ProviderUsageReader:
    """``(capacity, used)`` by class name for one provider; DatabaseUnavailable otherwise."""

    def __init__(self, dsn: str, *, timeout: float, redacted: str, max_size: int = 4) -> None:
        self._dsn = dsn
        self._timeout = timeout
        self._redacted = redacted
        self._max_size = max_size
        self._pool: asyncpg.Pool | None = None
        self._opening: asyncio.Lock = asyncio.Lock()

    async def read(self, provider_uuid: str) -> tuple[Capacity, Used]:
        try:
            async with asyncio.timeout(self._timeout):
                pool = await self._get_pool()
                rows = await pool.fetch(_USAGE, provider_uuid)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise DatabaseUnavailable(f"placement database ({self._redacted}): {msg}") from exc
        capacity = {
            name: int((total - reserved) * float(ratio)) for name, total, reserved, ratio, _ in rows
        }
        used = {row[0]: int(row[4]) for row in rows if row[4]}
        return capacity, used

    async def _get_pool(self) -> asyncpg.Pool:
        async with self._opening:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self._dsn, min_size=0, max_size=self._max_size, statement_cache_size=8
                )
            return self._pool

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                async with asyncio.timeout(2):
                    await pool.close()
            except Exception:
                with contextlib.suppress(Exception):
                    pool.terminate()
