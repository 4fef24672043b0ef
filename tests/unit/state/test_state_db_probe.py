"""NovaDatabase while down: cheap probes on a short, capped schedule, recorded as failures."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import asyncpg
import pytest

from asyncsched.state.db import NovaDatabase, close_or_terminate


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


class _Conn:
    async def fetchval(self, sql: str) -> int:
        return 1


class _Acquire:
    async def __aenter__(self) -> _Conn:
        return _Conn()

    async def __aexit__(self, *_: object) -> None:
        return None


class _Pool:
    def acquire(self) -> _Acquire:
        return _Acquire()

    def terminate(self) -> None:
        pass


async def test_a_database_that_answers_but_fails_reads_backs_off_the_slow_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def pool(*_: Any, **__: Any) -> _Pool:
        return _Pool()

    monkeypatch.setattr(asyncpg, "create_pool", pool)
    db = _db()
    db.mark_failed(TimeoutError("read timed out"))  # the pass that found it failing
    delays = [db.retry_delay]
    for _ in range(4):
        assert await db.probe() is True  # it answers ...
        db.mark_failed(TimeoutError("read timed out"))  # ... but the full read fails again
        delays.append(db.retry_delay)
    assert delays == [0.1, 1.0, 2.0, 4.0, 8.0] and db.read_failures == 4
    db.mark_ok()
    assert db.retry_delay == 0.0 and db.read_failures == 0


class _Handle:
    """A pool or connection whose close() returns, raises or hangs."""

    def __init__(self, close: str) -> None:
        self.how, self.closed, self.terminated = close, False, False

    async def close(self) -> None:
        if self.how == "hangs":
            await asyncio.sleep(3600)
        if self.how == "raises":
            raise OSError("connection reset")
        self.closed = True

    def terminate(self) -> None:
        self.terminated = True


@pytest.mark.parametrize(
    ("how", "closed", "terminated"),
    [("returns", True, False), ("raises", False, True), ("hangs", False, True)],
)
async def test_close_then_terminate_never_blocks_shutdown(
    how: str, closed: bool, terminated: bool
) -> None:
    handle = _Handle(how)
    async with asyncio.timeout(2):  # the bound below is 0.05 s
        await close_or_terminate(handle, 0.05)
    assert (handle.closed, handle.terminated) == (closed, terminated)


class _NodePool:
    """A MySQL pool on one address of a two-node cluster whose first node is gone."""

    def __init__(self, host: int) -> None:
        self.host = host

    async def fetch(self, sql: str, args: tuple[Any, ...]) -> list[Any]:
        await asyncio.sleep(0)  # the three reads are all on this pool when it fails
        if self.host == 0:
            raise ConnectionRefusedError(111, "node 0 is gone")
        return [(1,)]

    async def ping(self) -> None:
        await self.fetch("SELECT 1", ())

    def terminate(self) -> None:
        pass


async def test_a_failed_galera_node_sends_the_next_pool_to_the_next_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asyncsched.state.db_mysql import MysqlPool

    opened: list[int] = []

    async def open_pool(*_: Any, host: int, **__: Any) -> _NodePool:
        opened.append(host)
        return _NodePool(host)

    monkeypatch.setattr(MysqlPool, "open", open_pool)
    db = NovaDatabase(
        "cell1",
        "mysql+pymysql://nova:pw@db1,db2/nova",
        pool_size=1,
        query_timeout=5,
        reconnect_max=0.5,
        clock=time.time,
    )
    assert db.address == "db1:3306"
    results = await asyncio.gather(
        *(db.fetch("SELECT 1") for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, Exception) for r in results)
    assert db.address == "db2:3306"  # three reads failed together: one address on, not three
    assert await db.probe() is True and opened == [0, 1]
