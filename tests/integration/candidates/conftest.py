"""Real Placement (gunicorn + PostgreSQL or MariaDB, as ``db_backend`` says) and a read-only
login for the mirror, as an operator would grant it."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.support import mysql
from tests.support.nova_db import Backend, url_for
from tests.support.placement_server import PG_HOST, PG_USER, PlacementServer, _pg_exec


def pg_exec_in(db: str, sql: str) -> None:
    import psycopg2

    conn = psycopg2.connect(host=PG_HOST, user=PG_USER, dbname=db)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(sql)
    finally:
        conn.close()


def _my_exec(sql: str) -> None:
    with mysql.admin() as cur:
        cur.execute(sql)


@dataclass(frozen=True, slots=True)
class ReadOnlyRole:
    name: str
    db: str
    backend: Backend = "postgresql"

    @property
    def url(self) -> str:
        return url_for(self.db, user=self.name, backend=self.backend)

    @property
    def _account(self) -> str:
        return f"'{self.name}'@'127.0.0.1'"

    def block(self) -> None:
        """The mirror's database access is gone: no new logins, its sessions ended."""
        if self.backend == "mysql":
            _my_exec(f"ALTER USER {self._account} ACCOUNT LOCK")
            with mysql.admin() as cur:
                cur.execute(
                    "SELECT id FROM information_schema.processlist WHERE user = %s", (self.name,)
                )
                for row in cur.fetchall():
                    cur.execute(f"KILL {int(row['id'])}")
            return
        _pg_exec(f'ALTER ROLE "{self.name}" NOLOGIN')
        _pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'"
        )

    def unblock(self) -> None:
        if self.backend == "mysql":
            _my_exec(f"ALTER USER {self._account} ACCOUNT UNLOCK")
            return
        _pg_exec(f'ALTER ROLE "{self.name}" LOGIN')

    def create(self) -> None:
        """``GRANT SELECT`` on Placement's tables to a login of its own: all the mirror needs."""
        if self.backend == "mysql":
            _my_exec(f"CREATE USER {self._account} IDENTIFIED BY ''")
            _my_exec(f"GRANT SELECT ON {mysql.quote(self.db)}.* TO {self._account}")
            return
        _pg_exec(f'CREATE ROLE "{self.name}" LOGIN')
        pg_exec_in(
            self.db,
            f'GRANT CONNECT ON DATABASE "{self.db}" TO "{self.name}"; '
            f'GRANT USAGE ON SCHEMA public TO "{self.name}"; '
            f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{self.name}"',
        )

    def drop(self) -> None:
        self.unblock()
        if self.backend == "mysql":
            self.block()  # its sessions ended
            _my_exec(f"DROP USER IF EXISTS {self._account}")
            return
        _pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'"
        )
        pg_exec_in(self.db, f'DROP OWNED BY "{self.name}"')
        _pg_exec(f'DROP ROLE IF EXISTS "{self.name}"')


@pytest.fixture(scope="module")
def placement(placement_server: PlacementServer) -> PlacementServer:
    return placement_server


@pytest.fixture(scope="module")
def ro_role(placement: PlacementServer) -> Iterator[ReadOnlyRole]:
    """A read-only login on Placement's database for the mirror."""
    role = ReadOnlyRole(
        f"mirror_ro_{uuidlib.uuid4().hex[:10]}", placement.db_name, placement.db_backend
    )
    role.create()
    try:
        yield role
    finally:
        role.drop()
