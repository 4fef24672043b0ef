"""Nova's databases on MariaDB for tests and benchmarks, schema made by nova 34's nova-manage.

``MysqlNovaDB`` is ``NovaDB`` (same seeding helpers, same cells) on the MariaDB of
``tools/services.sh``. The schema is nova's own: ``nova-manage api_db sync`` and ``db sync``
run once into two template databases (kept between runs, re-made when nova's migration head
changes), and each test's databases copy their tables (``CREATE TABLE ... LIKE``), which takes
a fraction of a second where a ``db sync`` takes many.

The seeding helpers' SQL is PostgreSQL's (``$n``, ``RETURNING id``, ``ON CONFLICT DO
NOTHING``); the small adapter below sends it as MySQL does it (sessions use ``ANSI_QUOTES``
like asyncsched's, so ``"binary"`` is an identifier).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import subprocess
import time
from collections.abc import AsyncIterator, Iterable, Sequence
from pathlib import Path
from typing import Any

import asyncmy

from asyncsched.state.db_mysql import bind, row_type
from tests.support.nova_db import API_SCHEMA, CELL0_UUID, CELL_SCHEMA, CellDB, NovaDB, utcnow
from tests.support.nova_scheduler import NOVA_BIN, nova_env
from tests.support.tcp_proxy import TcpProxy

MYSQL_HOST, MYSQL_PORT, MYSQL_USER = "127.0.0.1", 3306, "root"
TEMPLATE = "asyncsched_tpl_nova34"
_SESSION = "SET SESSION sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'ANSI_QUOTES')"
_RETURNING = re.compile(r"\s+RETURNING\s+id\s*$", re.IGNORECASE)
_ON_CONFLICT = re.compile(r"\s+ON CONFLICT \([^)]*\) DO NOTHING", re.IGNORECASE)
_KEY = re.compile(r"(?<![\"\w])key(?![\"\w])")  # a reserved word in MySQL
_TEMPLATE_LOCK = asyncio.Lock()
_TEMPLATE_LOCK_NAME = f"{TEMPLATE}_sync"


def mysql_url_for(dbname: str, *, host: str = MYSQL_HOST, port: int = MYSQL_PORT) -> str:
    """The URL nova.conf / cell_mappings hold for a MariaDB database, as kolla writes it."""
    return f"mysql+pymysql://{MYSQL_USER}@{host}:{port}/{dbname}?charset=utf8"


def _translate(sql: str) -> tuple[str, bool]:
    """PostgreSQL seeding SQL as MySQL takes it; True when it asked for the new id."""
    returning = bool(_RETURNING.search(sql))
    sql = _KEY.sub('"key"', _RETURNING.sub("", sql))
    if _ON_CONFLICT.search(sql):
        sql = _ON_CONFLICT.sub("", sql).replace("INSERT INTO", "INSERT IGNORE INTO", 1)
    return sql, returning


async def connect(db: str | None = None, *, port: int = MYSQL_PORT) -> Any:
    return await asyncmy.connect(
        host=MYSQL_HOST,
        port=port,
        user=MYSQL_USER,
        db=db,
        autocommit=True,
        init_command=_SESSION,
    )


class MysqlConn:
    """The part of an asyncpg connection the seeding helpers use, over asyncmy."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn
        # one statement at a time: seed_cloud seeds hosts concurrently, and two queries on one
        # MySQL connection at once break its packet sequence
        self._one = asyncio.Lock()

    async def _run(self, sql: str, args: Sequence[Any]) -> tuple[list[Any], int]:
        text, returning = _translate(sql)
        query, bound = bind(text, args)
        async with self._one, self._conn.cursor() as cur:
            await cur.execute(query, bound)
            if returning:
                return [(cur.lastrowid,)], cur.rowcount
            if not cur.description:
                return [], cur.rowcount
            make = row_type(tuple(d[0] for d in cur.description))
            return [make(r) for r in await cur.fetchall()], cur.rowcount

    async def execute(self, sql: str, *args: Any) -> str:
        _, count = await self._run(sql, args)
        return f"OK {count}"

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return (await self._run(sql, args))[0]

    async def fetchval(self, sql: str, *args: Any) -> Any:
        rows = (await self._run(sql, args))[0]
        return rows[0][0] if rows else None

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """One multi-row INSERT per batch (the driver's executemany), as bulk seeding needs."""
        text = _translate(sql)[0]
        rows = list(rows)
        if not rows:
            return
        query = bind(text, rows[0])[0]
        async with self._conn.cursor() as cur:
            for i in range(0, len(rows), 2000):
                await cur.executemany(query, [bind(text, r)[1] for r in rows[i : i + 2000]])

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[None]:
        await self._conn.begin()
        try:
            yield
        except BaseException:
            await self._conn.rollback()
            raise
        await self._conn.commit()


class _Pool(MysqlConn):
    """One connection standing in for a pool (seeding is sequential)."""

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[MysqlConn]:
        yield self

    def terminate(self) -> None:
        self._conn.close()

    async def close(self) -> None:
        await self._conn.ensure_closed()


def _manage(conf: Path, *args: str) -> None:
    cmd = [str(NOVA_BIN / "nova-manage"), "--config-file", str(conf), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=nova_env())
    if done.returncode != 0:
        raise RuntimeError(
            f"nova-manage {' '.join(args)} exited {done.returncode}: "
            f"stdout {done.stdout[-2000:]!r}; stderr {done.stderr[-3000:]!r}"
        )


async def _tables(conn: Any, db: str) -> list[str]:
    async with conn.cursor() as cur:
        await cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (db,)
        )
        return [r[0] for r in await cur.fetchall()]


async def ensure_templates(work: Path) -> None:
    """nova-manage's API and cell schema in ``TEMPLATE_api`` / ``TEMPLATE_cell`` (once).

    pytest-xdist's workers are processes: MariaDB's named lock (``GET_LOCK``, held by this
    connection until it closes) keeps one worker's check-drop-sync from racing another's,
    which dropped the template under a sync in progress (nova-manage failed at random)."""
    async with _TEMPLATE_LOCK:
        conn = await connect()
        try:
            async with conn.cursor() as cur:
                await cur.execute("SELECT GET_LOCK(%s, 1800)", (_TEMPLATE_LOCK_NAME,))
                (got,) = await cur.fetchone()
                if got != 1:
                    raise RuntimeError(f"MariaDB's lock {_TEMPLATE_LOCK_NAME} not granted: {got}")
            api, cell = f"{TEMPLATE}_api", f"{TEMPLATE}_cell"
            if "compute_nodes" in await _tables(conn, cell) and "cell_mappings" in await _tables(
                conn, api
            ):
                return
            async with conn.cursor() as cur:
                for db in (api, cell):
                    await cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
                    await cur.execute(f"CREATE DATABASE `{db}` CHARACTER SET utf8")
            await asyncio.to_thread(_sync, work, api, cell)
        finally:
            conn.close()  # the named lock goes with the connection


def _sync(work: Path, api: str, cell: str) -> None:
    work.mkdir(parents=True, exist_ok=True)
    conf = work / "nova-manage-mysql.conf"
    conf.write_text(
        f"[api_database]\nconnection = {mysql_url_for(api)}\n"
        f"[database]\nconnection = {mysql_url_for(cell)}\n"
    )
    _manage(conf, "api_db", "sync")
    _manage(conf, "db", "sync", "--local_cell")


class MysqlNovaDB(NovaDB):
    """``NovaDB`` on MariaDB: an API, cell0 and N cell databases with nova-manage's schema."""

    dialect = "mysql"

    def __init__(self, work: Path, *, prefix: str = "asyncsched") -> None:
        super().__init__(prefix=prefix)
        self.work = work
        self._conns: dict[str, _Pool] = {}
        # asyncsched reaches each database through its own proxy, which take_cell_away cuts
        # (MariaDB cannot rename a database away); the seeding helpers connect directly.
        self.proxies: dict[str, TcpProxy] = {}

    def url_of(self, dbname: str) -> str:
        proxy = self.proxies.get(dbname)
        if proxy is None:
            proxy = self.proxies[dbname] = TcpProxy(MYSQL_HOST, MYSQL_PORT).start()
        return mysql_url_for(dbname, port=proxy.port)

    @property
    def api_url(self) -> str:
        return self.url_of(self.api_dbname)

    @property
    def api_dsn(self) -> str:
        return self.api_url

    async def create(self, n_cells: int = 2) -> NovaDB:
        await ensure_templates(self.work)
        return await super().create(n_cells)

    async def _create_db(self, dbname: str, schema: str) -> None:
        template = f"{TEMPLATE}_api" if schema is API_SCHEMA else f"{TEMPLATE}_cell"
        conn = await connect()
        try:
            tables = await _tables(conn, template)
            async with conn.cursor() as cur:
                await cur.execute(f"CREATE DATABASE `{dbname}` CHARACTER SET utf8")
                self._dbnames.append(dbname)
                for t in tables:
                    await cur.execute(f"CREATE TABLE `{dbname}`.`{t}` LIKE `{template}`.`{t}`")
        finally:
            conn.close()

    async def add_cell(
        self, name: str, *, uuid: str | None = None, disabled: bool = False
    ) -> CellDB:
        dbname = f"{self.tag}_{name}"
        await self._create_db(dbname, CELL_SCHEMA)
        cell_uuid = uuid or _uuid()
        cell_id = await self.api_fetchval(
            "INSERT INTO cell_mappings (created_at, uuid, name, transport_url,"
            " database_connection, disabled) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
            utcnow(),
            cell_uuid,
            name,
            "rabbit://guest:guest@127.0.0.1:5672/",
            self.url_of(dbname),
            disabled,
        )
        cell = CellDB(id=cell_id, uuid=cell_uuid, name=name, dbname=dbname)
        if cell_uuid != CELL0_UUID:
            self.cells.append(cell)
        return cell

    async def _pool(self, dbname: str) -> Any:
        pool = self._conns.get(dbname)
        if pool is None:
            pool = self._conns[dbname] = _Pool(await connect(dbname))
        return pool

    async def _close_pool(self, dbname: str) -> None:
        pool = self._conns.pop(dbname, None)
        if pool is not None:
            pool.terminate()

    async def drop(self) -> None:
        for proxy in self.proxies.values():
            await asyncio.to_thread(proxy.close)
        for pool in self._conns.values():
            pool.terminate()
        self._conns.clear()
        conn = await connect()
        try:
            async with conn.cursor() as cur:
                for name in self._dbnames:
                    await cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        finally:
            conn.close()

    async def take_cell_away(self, cell: CellDB) -> None:
        """The database stops answering asyncsched: its proxy is cut."""
        self.url_of(cell.dbname)
        await asyncio.to_thread(self.proxies[cell.dbname].cut)

    async def bring_cell_back(self, cell: CellDB) -> None:
        await asyncio.to_thread(self.proxies[cell.dbname].restore)


def _uuid() -> str:
    import uuid

    return str(uuid.uuid4())


def is_mysql(db: NovaDB) -> bool:
    return isinstance(db, MysqlNovaDB)


async def past_the_second(db: NovaDB) -> None:
    """Wait until the clock is in a later whole second than now: nova's DATETIME stamps are
    whole seconds on MySQL (and a writer's clock may truncate on PostgreSQL too), so the cache
    reads again every row of a read's own second; a test that needs a change to be *after* a
    read, not in its second, waits for the next one."""
    now = time.time()
    await asyncio.sleep(math.ceil(now) - now + 0.05)
