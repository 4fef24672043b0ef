"""HostStateCache reports every pass over every database (real PostgreSQL): full at start,
incremental after, failures of the database that went away."""

from __future__ import annotations

import pytest

from asyncsched.state.cache import HostStateCache
from tests.support.nova_db import NodeSpec, NovaDB
from tests.support.recorder import RecordingRecorder

pytestmark = pytest.mark.integration


async def test_passes_by_database_kind_and_outcome(nova_db: NovaDB) -> None:
    c1, c2 = nova_db.cells
    await nova_db.add_host(c1, NodeSpec(host="h1"))
    await nova_db.add_host(c2, NodeSpec(host="h2"))
    rec = RecordingRecorder()
    cfg = nova_db.config(refresh_interval=3600, db_query_timeout=3, db_reconnect_max=1)
    async with HostStateCache(cfg, recorder=rec) as cache:
        passes = {(cell, kind, ok) for cell, kind, _, ok in rec.named("refresh")}
        assert passes == {
            ("api", "full", True),
            (c1.name, "full", True),
            (c2.name, "full", True),
        }
        rec.calls.clear()
        await nova_db.take_cell_away(c2)
        try:
            await cache.refresh()
        finally:
            await nova_db.bring_cell_back(c2)
        passes = {(cell, kind, ok) for cell, kind, _, ok in rec.named("refresh")}
        assert passes == {
            ("api", "incremental", True),
            (c1.name, "incremental", True),
            (c2.name, "incremental", False),
        }
        assert all(seconds >= 0 for _, _, seconds, _ in rec.named("refresh"))
