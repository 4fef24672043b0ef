"""Real Placement (gunicorn + PostgreSQL) and a read-only PostgreSQL role for the mirror, as
an operator would grant it."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

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


@dataclass(frozen=True, slots=True)
class ReadOnlyRole:
    name: str
    db: str

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.name}@{PG_HOST}/{self.db}"

    def block(self) -> None:
        """The mirror's database access is gone: no new logins, its sessions ended."""
        _pg_exec(f'ALTER ROLE "{self.name}" NOLOGIN')
        _pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'"
        )

    def unblock(self) -> None:
        _pg_exec(f'ALTER ROLE "{self.name}" LOGIN')


@pytest.fixture(scope="module")
def placement(placement_server: PlacementServer) -> PlacementServer:
    return placement_server


@pytest.fixture(scope="module")
def ro_role(placement: PlacementServer) -> Iterator[ReadOnlyRole]:
    """``GRANT SELECT`` on Placement's tables to a login role of its own: all the mirror needs."""
    role = ReadOnlyRole(f"mirror_ro_{uuidlib.uuid4().hex[:10]}", placement.db_name)
    _pg_exec(f'CREATE ROLE "{role.name}" LOGIN')
    try:
        pg_exec_in(
            role.db,
            f'GRANT CONNECT ON DATABASE "{role.db}" TO "{role.name}"; '
            f'GRANT USAGE ON SCHEMA public TO "{role.name}"; '
            f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role.name}"',
        )
        yield role
    finally:
        role.unblock()
        _pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role.name}'"
        )
        pg_exec_in(role.db, f'DROP OWNED BY "{role.name}"')
        _pg_exec(f'DROP ROLE IF EXISTS "{role.name}"')
