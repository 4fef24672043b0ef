"""One nova database reached through a small pool, with bounded queries and backoff.

PostgreSQL through asyncpg (``db_pg.py``), MySQL/MariaDB through asyncmy (``db_mysql.py``); the
dialect's queries are ``NovaDatabase.sql``. Where a MySQL URL names several addresses (a Galera
cluster), a failure moves the next connection to the next address.

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

from asyncsched.common.backoff import Backoff
from asyncsched.conf.dsn import DatabaseURL, parse_db_url
from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.state.db_mysql import MysqlPool
from asyncsched.state.db_pg import PgPool
from asyncsched.state.sql import QUERIES, Queries

LOG = logging.getLogger(__name__)

# The first probe of a failed database comes this soon; the delay doubles to db_reconnect_max.
FIRST_PROBE_DELAY = 0.1
# A probe waits at most this long (or query_timeout if shorter) for a connection and SELECT 1.
PROBE_TIMEOUT = 5.0
# A database that answers probes but fails our reads (a read timing out under load, a broken
# table) is not read again in a tight loop: 1, 2, 4 ... s up to this, as before probes existed.
READ_RETRY_MAX = 30.0


class Closable(Protocol):
    """A pool or connection."""

    async def close(self) -> None: ...

    def terminate(self) -> None: ...


async def close_or_terminate(handle: Closable, within: float) -> None:
    """Close ``within`` seconds, else terminate: a hung server must not block shutdown."""
    try:
        async with asyncio.timeout(within):
            await handle.close()
    except Exception:
        handle.terminate()


class Pool(Protocol):
    """One dialect's pool: ``PgPool`` or ``MysqlPool``."""

    async def fetch(self, sql: str, args: tuple[Any, ...]) -> list[Any]: ...

    async def ping(self) -> None: ...

    def terminate(self) -> None: ...

    async def close(self) -> None: ...


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
        self.parsed: DatabaseURL = parse_db_url(url)  # ConfigError: not a usable URL
        self.dsn = self.parsed.asyncpg_dsn
        self.sql: Queries = QUERIES[self.parsed.dialect]
        self._host = 0  # the address tried first (several: a Galera cluster)
        self._opening = False
        self.pool_size = pool_size
        self.query_timeout = query_timeout
        self.reconnect_max = reconnect_max
        self._backoff = Backoff(FIRST_PROBE_DELAY, reconnect_max, jitter=0.0)
        self._read_backoff = Backoff(1.0, READ_RETRY_MAX, jitter=0.0)
        self._probed_ok = False
        self.read_failures = 0  # consecutive failed reads right after a successful probe
        self._clock = clock
        self._pool: Pool | None = None
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
                await pool.ping()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # still down, whatever the reason
            await self._discard_pool()
            self.mark_failed(exc)
            return False
        self._probed_ok = True
        return True

    async def _get_pool(self) -> Pool:
        async with self._pool_lock:
            if self._pool is None:
                size, timeout = self.pool_size, self.query_timeout
                self._opening = True  # a failure to open moves on to the next address too
                if self.parsed.dialect == "mysql":
                    self._pool = await MysqlPool.open(
                        self.parsed, size=size, query_timeout=timeout, host=self._host
                    )
                else:
                    self._pool = await PgPool.open(self.parsed, size=size, query_timeout=timeout)
                self._opening = False
            return self._pool

    @property
    def address(self) -> str | None:
        """The address connections go to now (MySQL), for ``health()`` and logs."""
        hosts = self.parsed.hosts
        if self.parsed.dialect != "mysql" or not hosts:
            return self.parsed.unix_socket
        host, port = hosts[self._host % len(hosts)]
        return f"{host}:{port}"

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        """Run one read query within ``query_timeout`` or raise DatabaseUnavailable."""
        try:
            async with asyncio.timeout(self.query_timeout):
                pool = await self._get_pool()
                rows = await pool.fetch(sql, args)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # any failure means "unavailable now"; never crash the caller
            await self._discard_pool()
            msg = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise DatabaseUnavailable(f"{self.name} ({self.redacted}): {msg}") from exc
        return rows

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
        """Drop the pool after a failure; the next one goes to the next address, if any."""
        pool, self._pool = self._pool, None
        # once per failed pool: reads that failed together move it one address on, not more
        if (pool is not None or self._opening) and len(self.parsed.hosts) > 1:
            self._host = (self._host + 1) % len(self.parsed.hosts)
        self._opening = False
        if pool is not None:
            pool.terminate()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await close_or_terminate(pool, 5.0)
