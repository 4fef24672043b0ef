"""Real PostgreSQL nova databases for the host-state cache tests."""

from tests.support.nova_db import nova_db

__all__ = ["nova_db"]
