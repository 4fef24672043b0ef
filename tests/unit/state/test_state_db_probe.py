"""NovaDatabase while down: cheap probes on a short, capped schedule, recorded as failures."""

from __future__ import annotations

import time
from typing import Any

import asyncpg
import pytest

from asyncsched.state.db import NovaDatabase


def _db(reconnect_max: float = 0.5) -> NovaDatabase:
    url = "postgresql://root@127.0.0.1:5432/nova_cell1"
    return NovaDatabase(
        "cell1", url, pool_size=1, query_timeout=30, reconnect_max=reconnect_max, clock=time.time
    )


def test_retry_delay_starts_short_and_doubles_to_the_cap() -> None:
    db = _db()
    delays = []
    for _ in range(6):
        delays.append(db.retry_delay)
        db.failures += 1
    assert delays == [0.0, 0.1, 0.2, 0.4, 0.5, 0.5]


async def test_a_probe_of_a_refusing_database_fails_fast_and_counts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def refused(*_: Any, **__: Any) -> None:
        raise ConnectionRefusedError(111, "Connect call failed")

    monkeypatch.setattr(asyncpg, "create_pool", refused)
    db = _db()
    assert await db.probe() is False
    assert await db.probe() is False
    assert db.failures == 2 and db.failed_since is not None
    assert db.last_error is not None and "Connect call failed" in db.last_error
    await db.close()
