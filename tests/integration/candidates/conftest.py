"""Real Placement (gunicorn + PostgreSQL) and a read-only PostgreSQL role for the mirror, as
an operator would grant it."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterator

import pytest

from tests.support.mirror_role import ReadOnlyRole
from tests.support.placement_server import PlacementServer, pg_exec


@pytest.fixture(scope="module")
def placement(placement_server: PlacementServer) -> PlacementServer:
    return placement_server


@pytest.fixture(scope="module")
def ro_role(placement: PlacementServer) -> Iterator[ReadOnlyRole]:
    """``GRANT SELECT`` on Placement's tables to a login role of its own: all the mirror needs."""
    role = ReadOnlyRole(f"mirror_ro_{uuidlib.uuid4().hex[:10]}", placement.db_name)
    pg_exec(f'CREATE ROLE "{role.name}" LOGIN')
    try:
        pg_exec(
            f'GRANT CONNECT ON DATABASE "{role.db}" TO "{role.name}"; '
            f'GRANT USAGE ON SCHEMA public TO "{role.name}"; '
            f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role.name}"',
            db=role.db,
        )
        yield role
    finally:
        role.unblock()
        pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{role.name}'"
        )
        pg_exec(f'DROP OWNED BY "{role.name}"', db=role.db)
        pg_exec(f'DROP ROLE IF EXISTS "{role.name}"')
