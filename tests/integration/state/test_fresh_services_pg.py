"""Services as fresh as nova's per-request read (issue 20), on real PostgreSQL nova databases.

The refresh interval is an hour in every test: whatever a request sees here it got from its
own read of ``services`` (``HostStateCache.fresh_services``), as nova-scheduler reads it on
every request. The verdict is ComputeFilter's, on the cache's hosts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from asyncsched.conf.options import Config, DefaultOptions
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.state.cache import HostStateCache
from asyncsched.state.sql import FRESH_OVERLAP
from tests.support.nova_db import NodeSpec, NovaDB, old, url_for, utcnow
from tests.support.nova_db_mysql import is_mysql
from tests.support.table_lock import table_locked
from tests.support.tcp_proxy import tcp_proxy

pytestmark = pytest.mark.integration

SPEC = RequestSpec(flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1))


def config(db: NovaDB, down_time: int = 60, **asyncsched: Any) -> Config:
    cfg = db.config(refresh_interval=3600, **asyncsched)
    return replace(cfg, default=DefaultOptions(service_down_time=down_time))


async def verdict(cache: HostStateCache, cfg: Config, node_uuid: str) -> str | None:
    """What the next request's ComputeFilter says of this node (None: it passes)."""
    await cache.fresh_services()
    hs = cache.get_by_uuid(node_uuid)
    assert hs is not None
    return ComputeFilter(cfg).state_passes(hs, SPEC)


@pytest.fixture
async def hosts(nova_db: NovaDB) -> AsyncIterator[dict[str, Any]]:
    c1, c2 = nova_db.cells
    yield {
        "db": nova_db,
        "c1": c1,
        "a": await nova_db.add_host(c1, NodeSpec(host="f-a")),
        "b": await nova_db.add_host(c1, NodeSpec(host="f-b")),
        "c": await nova_db.add_host(c2, NodeSpec(host="f-c")),
    }


async def test_disable_and_enable_are_seen_by_the_next_request(hosts: dict[str, Any]) -> None:
    db: NovaDB = hosts["db"]
    cfg = config(db)
    async with HostStateCache(cfg) as cache:
        passes = cache.metrics["refresh_passes"]
        assert await verdict(cache, cfg, hosts["a"]) is None
        await db.update_service(hosts["c1"], "f-a", disabled=True, disabled_reason="maint")
        assert await verdict(cache, cfg, hosts["a"]) == "disabled"
        await db.update_service(hosts["c1"], "f-a", disabled=False, disabled_reason=None)
        assert await verdict(cache, cfg, hosts["a"]) is None
        assert await verdict(cache, cfg, hosts["b"]) is None
        assert cache.metrics["refresh_passes"] == passes  # no refresh helped
        assert cache.metrics["services_fresh_reads"] >= 4


async def test_forced_down_and_back(hosts: dict[str, Any]) -> None:
    db: NovaDB = hosts["db"]
    cfg = config(db)
    async with HostStateCache(cfg) as cache:
        await db.update_service(hosts["c1"], "f-b", forced_down=True)
        assert await verdict(cache, cfg, hosts["b"]) == "down"
        await db.update_service(hosts["c1"], "f-b", forced_down=False)
        assert await verdict(cache, cfg, hosts["b"]) is None


async def test_silent_past_down_time_then_reporting_again(hosts: dict[str, Any]) -> None:
    """A compute that stopped reporting (service_down_time 2 s here) is refused; its next
    heartbeat (nova's report_count update sets last_seen_up) is taken by the next request."""
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    await db.update_service(c1, "f-a", last_seen_up=old(30), updated_at=old(30))
    cfg = config(db, down_time=2)
    async with HostStateCache(cfg) as cache:
        assert await verdict(cache, cfg, hosts["a"]) == "down"
        await db.update_service(c1, "f-a", last_seen_up=utcnow(), report_count=2)
        assert await verdict(cache, cfg, hosts["a"]) is None
        for _ in range(100):  # it stops again: silent past service_down_time
            if await verdict(cache, cfg, hosts["a"]) is not None:
                break
            await asyncio.sleep(0.1)
        assert await verdict(cache, cfg, hosts["a"]) == "down"
        await db.update_service(c1, "f-a", last_seen_up=utcnow(), report_count=3)
        assert await verdict(cache, cfg, hosts["a"]) is None


@pytest.mark.parametrize("stamp", ["whole second", "late commit"])
async def test_a_row_stamped_before_the_last_read_is_not_missed(
    hosts: dict[str, Any], stamp: str
) -> None:
    """updated_at comes from the writer's clock: whole seconds (MySQL DATETIME), or a little
    before a commit that lands after our read. The next read still sees the change."""
    db: NovaDB = hosts["db"]
    cfg = config(db)
    async with HostStateCache(cfg) as cache:
        assert await verdict(cache, cfg, hosts["a"]) is None
        now = utcnow()
        at = now.replace(microsecond=0) if stamp == "whole second" else old(1.5)
        await db.update_service(hosts["c1"], "f-a", disabled=True, updated_at=at)
        assert await verdict(cache, cfg, hosts["a"]) == "disabled"


async def test_concurrent_requests_share_reads(hosts: dict[str, Any]) -> None:
    db: NovaDB = hosts["db"]
    cfg = config(db)
    async with HostStateCache(cfg) as cache:
        await db.update_service(hosts["c1"], "f-a", disabled=True)
        before = cache.metrics["services_fresh_reads"]
        await asyncio.gather(*(cache.fresh_services() for _ in range(50)))
        reads = cache.metrics["services_fresh_reads"] - before
        assert 2 <= reads <= 4  # one or two per cell, not fifty
        hs = cache.get_by_uuid(hosts["a"])
        assert hs is not None and hs.service is not None and hs.service.disabled


async def test_a_cut_cell_database_is_answered_from_the_cache(hosts: dict[str, Any]) -> None:
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    mysql = is_mysql(db)
    with tcp_proxy("127.0.0.1", 3306 if mysql else 5432) as proxy:
        await db.api_execute(
            "UPDATE cell_mappings SET database_connection = $1 WHERE uuid = $2",
            url_for(c1.dbname, port=proxy.port, backend="mysql" if mysql else "postgresql"),
            c1.uuid,
        )
        cfg = config(db, db_query_timeout=5)
        async with HostStateCache(cfg) as cache:
            await db.update_service(c1, "f-a", disabled=True)
            assert await verdict(cache, cfg, hosts["a"]) == "disabled"
            await asyncio.to_thread(proxy.cut)
            await db.update_service(c1, "f-a", disabled=False)
            await db.update_service(hosts["c1"], "f-b", disabled=True)
            # the cut cell keeps its cached services; the other cell is still read
            await db.update_service(db.cells[1], "f-c", disabled=True)
            assert await verdict(cache, cfg, hosts["a"]) == "disabled"
            assert await verdict(cache, cfg, hosts["b"]) is None
            assert await verdict(cache, cfg, hosts["c"]) == "disabled"
            fresh = cache.health()["cells"][c1.uuid]["services_fresh"]
            assert not fresh["ok"] and fresh["last_error"]
            assert cache.metrics["services_fresh_failures"] >= 1
            await asyncio.to_thread(proxy.restore)
            for _ in range(100):  # the cell's probe, or its next fresh read after 1 s
                if await verdict(cache, cfg, hosts["a"]) is None:
                    break
                await asyncio.sleep(0.1)
            assert await verdict(cache, cfg, hosts["a"]) is None
            assert await verdict(cache, cfg, hosts["b"]) == "disabled"


async def test_a_hanging_services_read_is_not_waited_for(hosts: dict[str, Any]) -> None:
    """services locked (every read hangs, far longer than db_query_timeout allows here):
    requests are answered from the cache after fresh_services_wait, the next ones skip the
    cell while that read hangs, and the read lands once the lock is gone."""
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    cfg = config(db, fresh_services_wait=0.2, db_query_timeout=600)
    async with HostStateCache(cfg) as cache:
        async with table_locked(db, c1, "services") as blocker:
            await asyncio.wait_for(cache.fresh_services(), 60)  # a guard against a hang only
            fresh = cache.health()["cells"][c1.uuid]["services_fresh"]
            assert not fresh["ok"] and "fresh_services_wait" in fresh["last_error"]
            skipped = cache.metrics["services_fresh_skipped"]
            await asyncio.wait_for(cache.fresh_services(), 60)
            assert cache.metrics["services_fresh_skipped"] == skipped + 1
            assert cache.get_by_uuid(hosts["a"]) is not None  # still served
            await blocker.execute(  # as nova writes it: updated_at set by the writer
                "UPDATE services SET disabled = true, updated_at = $1 WHERE host = 'f-a'",
                utcnow(),
            )
        for _ in range(100):  # the hung read completes and the cell is read again
            if await verdict(cache, cfg, hosts["a"]) == "disabled":
                break
            await asyncio.sleep(0.05)
        assert await verdict(cache, cfg, hosts["a"]) == "disabled"
        assert cache.health()["cells"][c1.uuid]["services_fresh"]["ok"]


async def test_a_refresh_that_applies_an_older_view_is_corrected(hosts: dict[str, Any]) -> None:
    """A refresh pass read before an enable but applied after the fresh read that saw it:
    the next request's read looks back to the pass's start and takes the enable again."""
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    cfg = config(db)
    await db.update_service(c1, "f-a", disabled=True)
    async with HostStateCache(cfg) as cache:
        assert await verdict(cache, cfg, hosts["a"]) == "disabled"
        # hold the pass after its services read: compute_nodes is locked
        async with table_locked(db, c1, "compute_nodes"):
            refresh = asyncio.create_task(cache.refresh(full=True))
            await asyncio.sleep(0.5)
            await db.update_service(c1, "f-a", disabled=False)
            assert await verdict(cache, cfg, hosts["a"]) is None
            await asyncio.sleep(FRESH_OVERLAP.total_seconds() + 0.5)
            assert await verdict(cache, cfg, hosts["a"]) is None  # its window is past the enable
        await refresh
        hs = cache.get_by_uuid(hosts["a"])
        assert hs is not None and hs.service is not None and hs.service.disabled  # older view
        assert await verdict(cache, cfg, hosts["a"]) is None
