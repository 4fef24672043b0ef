"""MySQL/MariaDB behind ``NovaDatabase``: one small asyncmy pool on one node at a time.

Sessions are set up so that the SQL written once for both dialects (``state/sql.py``) means
the same here: ``ANSI_QUOTES`` (``"binary"`` and ``"key"`` are identifiers), a
``group_concat_max_len`` that never cuts the folded image properties, and autocommit: under
InnoDB's REPEATABLE READ a connection inside a transaction would see the snapshot of its first
read for ever after. Rows come back as :class:`Row`, read by name or position like asyncpg's.

Parameters are written ``$1``, ``$2`` as for asyncpg; the driver interpolates them on the
client (``%s``); a list parameter becomes ``(%s, %s, ...)``, an empty one ``(NULL)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from types import ModuleType
from typing import Any, ClassVar

import asyncmy

from asyncsched.conf.dsn import DatabaseURL

_SESSION = (
    "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'ANSI_QUOTES'),"
    " SESSION group_concat_max_len = 16777216"
)
_PARAM = re.compile(r"\$(\d+)")


class Row(tuple[Any, ...]):
    """A row by position (``r[0]``, ``tuple(r)``) and by column name (``r["id"]``)."""

    __slots__ = ()
    _index: ClassVar[dict[str, int]] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self._index[key])
        return tuple.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        i = self._index.get(key)
        return default if i is None else tuple.__getitem__(self, i)

    def keys(self) -> Iterator[str]:
        return iter(self._index)

    def values(self) -> Iterator[Any]:
        return tuple.__iter__(self)

    def items(self) -> Iterator[tuple[str, Any]]:
        return zip(self._index, self, strict=True)


@lru_cache(maxsize=256)
def row_type(names: tuple[str, ...]) -> type[Row]:
    """The Row class of one result shape (one per query, cached)."""
    return type("Row", (Row,), {"__slots__": (), "_index": {n: i for i, n in enumerate(names)}})


@lru_cache(maxsize=512)
def _split(sql: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The text between ``$n`` placeholders (``%`` doubled) and each one's argument index."""
    parts = _PARAM.split(sql.replace("%", "%%"))
    return tuple(parts[0::2]), tuple(int(n) - 1 for n in parts[1::2])


def bind(sql: str, args: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """The query and arguments as the driver takes them: ``$n`` -> ``%s``, a list argument
    -> ``(%s, %s, ...)`` with its items (PyMySQL 1.2 no longer escapes sequences), an empty
    one -> ``(NULL)``, which matches nothing."""
    texts, order = _split(sql)
    out: list[str] = [texts[0]]
    bound: list[Any] = []
    for i, text in zip(order, texts[1:], strict=True):
        arg = args[i]
        if isinstance(arg, list | tuple | set | frozenset):
            out.append("(" + ", ".join("%s" for _ in arg) + ")" if arg else "(NULL)")
            bound.extend(arg)
        else:
            out.append("%s")
            bound.append(arg)
        out.append(text)
    return "".join(out), tuple(bound)


# MySQL column types whose value is a datetime: TIMESTAMP, DATE, DATETIME
_DATE_TYPES = frozenset({7, 10, 12})


def as_rows(description: Sequence[Sequence[Any]], rows: Sequence[Sequence[Any]]) -> list[Row]:
    """Driver rows as :class:`Row`. A date the driver could not read (MySQL's zero date
    ``0000-00-00 00:00:00``, which MariaDB stores without NO_ZERO_DATE) comes back as text:
    it becomes None, as nova reads it, instead of breaking every pass over that row."""
    make = row_type(tuple(d[0] for d in description))
    dates = [i for i, d in enumerate(description) if d[1] in _DATE_TYPES]
    out: list[Row] = []
    for r in rows:
        if dates and any(isinstance(r[i], str | bytes) for i in dates):
            fixed = list(r)
            for i in dates:
                if isinstance(fixed[i], str | bytes):
                    fixed[i] = None
            r = fixed
        out.append(make(r))
    return out


def connect_kwargs(url: DatabaseURL, host: int, timeout: float) -> dict[str, Any]:
    """The driver's connection arguments for ``url``, on its ``host``-th address."""
    kw: dict[str, Any] = {
        "user": url.user,
        "password": url.password or "",
        "db": url.database,
        "charset": url.charset,
        "autocommit": True,
        "init_command": _SESSION,
        "connect_timeout": url.connect_timeout or timeout,
    }
    if url.unix_socket and not url.hosts:
        kw["unix_socket"] = url.unix_socket
    else:
        kw["host"], kw["port"] = url.hosts[host % len(url.hosts)]
        if url.unix_socket:
            kw["unix_socket"] = url.unix_socket
    if url.tls is not None:
        kw["ssl"] = url.tls.context()
    return kw


class MysqlPool:
    """The pool of one database on one of its addresses."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @classmethod
    async def open(
        cls,
        url: DatabaseURL,
        *,
        size: int,
        query_timeout: float,
        host: int = 0,
        driver: ModuleType = asyncmy,
    ) -> MysqlPool:
        kw = connect_kwargs(url, host, query_timeout)
        # ``driver``: asyncmy; aiomysql has the same API (bench/bench_mysql_drivers.py)
        pool = await driver.create_pool(minsize=0, maxsize=size, **kw)
        return cls(pool)

    async def fetch(self, sql: str, args: Sequence[Any]) -> list[Any]:
        text, bound = bind(sql, args)
        async with self._pool.acquire() as conn, conn.cursor() as cur:
            await cur.execute(text, bound)
            rows = await cur.fetchall()
            if not cur.description:
                return []
            desc = cur.description
        return as_rows(desc, rows)

    async def ping(self) -> None:
        await self.fetch("SELECT 1", ())

    def terminate(self) -> None:
        self._pool.terminate()

    async def close(self) -> None:
        self._pool.close()
        await self._pool.wait_closed()
