"""Rows changed within the very second the last read saw (issue #25): nova's stamps are whole
seconds on MySQL, so such a row keeps the stamp that read applied. The next refresh still
sees every change, on PostgreSQL and MariaDB alike."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from asyncsched.state import readers
from asyncsched.state.cache import HostStateCache
from asyncsched.state.readers import CellRead
from tests.support.nova_db import NodeSpec, NovaDB


async def test_changes_stamped_with_the_second_of_the_last_read_are_seen(
    nova_db: NovaDB, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = nova_db
    c1 = db.cells[0]
    a = await db.add_host(c1, NodeSpec(host="s-a"))
    read_at: list[datetime] = []
    real = readers.read_cell

    async def read_cell(*args: Any) -> CellRead:
        read = await real(*args)
        read_at.append(read.db_now)
        return read

    monkeypatch.setattr("asyncsched.state.refresher.read_cell", read_cell)
    async with HostStateCache(db.config(refresh_interval=3600)) as cache:
        hs = cache.get_by_uuid(a)
        assert hs is not None and hs.service is not None and not hs.service.disabled
        for ram, reason in ((4001, "one"), (4002, "two")):
            await cache.refresh()
            # written after that read, stamped with its second (as a writer on MySQL would)
            at = read_at[-1].replace(microsecond=0)
            await db.update_compute_node(c1, a, free_ram_mb=ram, updated_at=at)
            await db.update_service(c1, "s-a", disabled=True, disabled_reason=reason, updated_at=at)
            await cache.refresh()
            assert hs.free_ram_mb == ram
            assert hs.service.disabled and hs.service.disabled_reason == reason
