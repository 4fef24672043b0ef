"""The local MariaDB (``tools/services.sh``: 127.0.0.1:3306, root, empty password) for tests,
benchmarks and the demo, through PyMySQL (the driver nova.conf's ``mysql+pymysql://`` names).

Two things: admin statements (create and drop databases, end the sessions on one), and
:class:`MysqlPool`, the part of asyncpg's pool the seeding helpers of
:mod:`tests.support.nova_db` use (``execute``/``fetch``/``fetchval``/``executemany``,
``acquire()`` and ``transaction()``), so those helpers keep their SQL written once: ``$n``
placeholders become PyMySQL's ``%s`` (arguments in the order they appear, repeats repeated) and
the session runs with ``ANSI_QUOTES``, so a ``"binary"`` identifier means what it means on
PostgreSQL. Each call runs PyMySQL in a worker thread, one statement at a time per connection.

Test-side only: asyncsched itself reads MySQL through its own asyncio driver.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pymysql
import pymysql.cursors

MYSQL_HOST = "127.0.0.1"
MYSQL_PORT = 3306
MYSQL_USER = "root"
MYSQL_SOCKET = "/run/mysqld/mysqld.sock"
_ANSI = "SET SESSION sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')"
_PLACEHOLDER = re.compile(r"\$(\d+)")


def connect(db: str | None = None, *, ansi_quotes: bool = False) -> Any:
    """A PyMySQL connection as root over TCP (autocommit; rows as dicts)."""
    return pymysql.connect(
        host=MYSQL_HOST,
        port=MYSQL_PORT,
        user=MYSQL_USER,
        password="",
        database=db,
        charset="utf8mb4",
        autocommit=True,
        cursorclass=pymysql.cursors.DictCursor,
        init_command=_ANSI if ansi_quotes else None,
    )


@contextmanager
def admin(db: str | None = None) -> Iterator[Any]:
    conn = connect(db)
    try:
        with conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


def quote(name: str) -> str:
    """A MySQL identifier in backquotes (names here are our own uuid-tagged ones)."""
    if "`" in name:
        raise ValueError(f"bad identifier {name!r}")
    return f"`{name}`"


def create_database(name: str) -> None:
    with admin() as cur:
        cur.execute(f"CREATE DATABASE {quote(name)} CHARACTER SET utf8mb4")


def end_sessions(db: str) -> None:
    """KILL every other session whose current database is ``db`` (a DROP would wait on them)."""
    with admin() as cur:
        cur.execute(
            "SELECT id FROM information_schema.processlist WHERE db = %s AND id <> CONNECTION_ID()",
            (db,),
        )
        for row in cur.fetchall():
            try:
                cur.execute(f"KILL {int(row['id'])}")
            except pymysql.err.OperationalError:
                pass  # it ended by itself meanwhile


def drop_databases(names: Iterable[str]) -> None:
    """DROP DATABASE IF EXISTS each, ending the sessions left on it first."""
    for name in names:
        end_sessions(name)
        with admin() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {quote(name)}")


def database_exists(name: str) -> bool:
    with admin() as cur:
        cur.execute("SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (name,))
        return cur.fetchone() is not None


def translate(sql: str, args: Sequence[Any]) -> tuple[str, tuple[Any, ...]]:
    """asyncpg's ``$n`` placeholders -> PyMySQL's ``%s`` and the arguments in their order.
    A literal ``%`` is doubled (PyMySQL formats the statement with ``%``)."""
    order: list[int] = []

    def one(m: re.Match[str]) -> str:
        order.append(int(m.group(1)) - 1)
        return "%s"

    out = _PLACEHOLDER.sub(one, sql.replace("%", "%%"))
    return out, tuple(args[i] for i in order)


class MysqlConnection:
    """One PyMySQL connection with asyncpg's call shapes; statements run in a worker thread."""

    def __init__(self, db: str) -> None:
        self.db = db
        self._conn: Any = None
        self._lock = threading.Lock()

    def _run(self, sql: str, args: Sequence[Any], how: str) -> Any:
        with self._lock:
            if self._conn is None:
                self._conn = connect(self.db, ansi_quotes=True)
            with self._conn.cursor() as cur:
                if how == "many":
                    rows = [translate(sql, a) for a in args]
                    return cur.executemany(rows[0][0], [r[1] for r in rows]) if rows else 0
                count = cur.execute(*translate(sql, args))
                if how == "execute":
                    return f"OK {count}"
                return list(cur.fetchall())

    async def execute(self, sql: str, *args: Any) -> str:
        return str(await asyncio.to_thread(self._run, sql, args, "execute"))

    async def fetch(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = await asyncio.to_thread(self._run, sql, args, "fetch")
        return rows

    async def fetchrow(self, sql: str, *args: Any) -> dict[str, Any] | None:
        rows = await self.fetch(sql, *args)
        return rows[0] if rows else None

    async def fetchval(self, sql: str, *args: Any) -> Any:
        row = await self.fetchrow(sql, *args)
        return None if row is None else next(iter(row.values()), None)

    async def executemany(self, sql: str, args: Iterable[Sequence[Any]]) -> None:
        await asyncio.to_thread(self._run, sql, list(args), "many")

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        await self.execute("BEGIN")
        try:
            yield
        except BaseException:
            await self.execute("ROLLBACK")
            raise
        await self.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except pymysql.err.Error:
                pass


class MysqlPool(MysqlConnection):
    """The pool the seeding helpers ask for: its own calls share one connection, one statement
    at a time; ``acquire()`` hands out a connection of its own (a transaction's statements
    then never mix with another task's), closed afterwards."""

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[MysqlConnection]:
        conn = MysqlConnection(self.db)
        try:
            yield conn
        finally:
            await asyncio.to_thread(conn.close)

    def terminate(self) -> None:
        self.close()
