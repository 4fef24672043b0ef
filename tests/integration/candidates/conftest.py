"""Real Placement (gunicorn + PostgreSQL or MariaDB, as ``db_backend`` says) and a read-only
login for the mirror, as an operator would grant it."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterator

import pytest

from tests.support.mirror_role import ReadOnlyRole
from tests.support.placement_server import PlacementServer


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
