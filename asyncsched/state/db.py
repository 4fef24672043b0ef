"""One nova database reached through a small asyncpg pool, with bounded queries and backoff.

A ``NovaDatabase`` never raises anything but ``DatabaseUnavailable`` from ``fetch``: timeouts,
refused connections, a renamed/dropped database and SQL errors all become "this database is
unavailable now", so the cache can keep serving and retry later. After a failure the pool is
thrown away (the next attempt reconnects from scratch). While it is down, the cache only
``probe``s it (``SELECT 1`` on a fresh connection, a bounded wait) after ``retry_delay``: 0.1 s
doubling to ``[asyncsched] db_reconnect_max`` (0.5 s). A database that answers again is read at
once, not after a long backoff (it used to wait up to 25 s); one that answers but fails the
read again backs off 1, 2, 4 ... 30 s (``read_failures``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any, Protocol

import asyncpg

from asyncsched.backoff import Backoff
from asyncsched.conf.dsn import to_asyncpg_dsn
from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import DatabaseUnavailable

LOG = logging.getLogger(__name__)

# The first probe of a failed database comes this soon; the delay doubles to db_reconnect_max.
FIRST_PROBE_DELAY = 0.1
# A probe waits at most this long (or query_timeout if shorter) for a connection and SELECT 1.
PROBE_TIMEOUT = 5.0
# A database that answers probes but fails our reads (a read timing out under load, a broken
# table) is not read again in a tight loop: 1, 2, 4 ... s up to this, as before probes existed.
READ_RETRY_MAX = 30.0


class Closable(Protocol):
    """An asyncpg pool or connection."""

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


async def close_or_terminate(handle: Closable, within: float) -> None:
    """Close ``within`` seconds, else terminate: a hung server must not block shutdown."""
    try:
        async with asyncio.timeout(within):
            await handle.close()
    except Exception:
        handle.terminate()


async def _read_only_session(conn: asyncpg.Connection) -> None:
    """Nothing to reset: these sessions only read (no LISTEN, locks, cursors or settings).
    asyncpg's default reset is a round trip after every query, on the query's path."""


class NovaDatabase:
    """Lazily connected pool for one database plus its health bookkeeping."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        pool_size: int,
        query_timeout: float,
        reconnect_max: float,
        clock: Callable[[], float],
    ) -> None:
        self.name = name
        self.url = url
        self.dsn = to_asyncpg_dsn(url)
        self.pool_size = pool_size
        self.query_timeout = query_timeout
        self.reconnect_max = reconnect_max
        self._backoff = Backoff(FIRST_PROBE_DELAY, reconnect_max, jitter=0.0)
        self._read_backoff = Backoff(1.0, READ_RETRY_MAX, jitter=0.0)
        self._probed_ok = False
        self.read_failures = 0  # consecutive failed reads right after a successful probe
        self._clock = clock
        self._pool: asyncpg.Pool | None = None
        self._pool_lock = asyncio.Lock()
        self.failures = 0
        self.last_error: str | None = None
        self.last_ok: float | None = None
        self.failed_since: float | None = None

    @property
    def redacted(self) -> str:
        return mask_url_passwords(self.url)

    @property
    def retry_delay(self) -> float:
        """Wait before the next probe after ``failures`` consecutive failures: 0.1, 0.2, ...;
        longer while the database answers probes but our reads keep failing."""
        if self.failures <= 0:
            return 0.0
        delay = self._backoff.base(self.failures - 1)
        if self.read_failures:
            delay = max(delay, self._read_backoff.base(self.read_failures - 1))
        return delay

    async def probe(self) -> bool:
        """Is the database answering again? One cheap ``SELECT 1``; a failure is recorded."""
        try:
            async with asyncio.timeout(min(self.query_timeout, PROBE_TIMEOUT)):
                pool = await self._get_pool()
                async with pool.acquire() as conn:
                    await conn.fetchval("SELECT 1")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # still down, whatever the reason
            await self._discard_pool()
            self.mark_failed(exc)
            return False
        self._probed_ok = True
        return True

    async def _get_pool(self) -> asyncpg.Pool:
        async with self._pool_lock:
            if self._pool is None:
                self._pool = await asyncpg.create_pool(
                    self.dsn,
                    min_size=0,
                    max_size=self.pool_size,
                    timeout=self.query_timeout,
                    command_timeout=self.query_timeout,
                    statement_cache_size=32,
                    reset=_read_only_session,
                )
            return self._pool

    async def fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        """Run one read query within ``query_timeout`` or raise DatabaseUnavailable."""
        try:
            async with asyncio.timeout(self.query_timeout):
                pool = await self._get_pool()
                async with pool.acquire() as conn:
                    rows = await conn.fetch(sql, *args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure means "unavailable now"; never crash the caller
            await self._discard_pool()
            msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise DatabaseUnavailable(f"{self.name} ({self.redacted}): {msg}") from exc
        return list(rows)

    def mark_ok(self) -> None:
        if self.failures:
            LOG.warning("database %s is reachable again", self.name)
        self.failures = 0
        self.read_failures = 0
        self._probed_ok = False
        self.failed_since = None
        self.last_ok = self._clock()

    def mark_failed(self, error: BaseException) -> None:
        if self.failures == 0:
            LOG.warning("database %s unavailable, serving cached state: %s", self.name, error)
            self.failed_since = self._clock()
        else:
            LOG.debug("database %s still unavailable: %s", self.name, error)
        self.failures += 1
        if self._probed_ok:  # it answered, then the read failed
            self.read_failures += 1
            self._probed_ok = False
        self.last_error = str(error)

    async def _discard_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.terminate()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await close_or_terminate(pool, 5.0)
