"""Heartbeats read by a sweep, not by every refresh pass (issue 24), on real nova databases.

A refresh pass between two sweeps reads only the services rows that can change a verdict;
every beat is read by a sweep every ``fresh.sweep_interval`` seconds (15 s at these down
times); a host entering the silent set is read by id at once. Here the refresh loops wait an
hour (except where a test says so) and the cache's clock is the test's, so a pass happens
when the test calls ``refresh()`` and a sweep when the test moves the clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from asyncsched.common.clock import as_utc
from asyncsched.conf.options import Config, DefaultOptions
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.state.cache import HostStateCache
from asyncsched.state.fresh import SWEEP_MAX
from asyncsched.state.host_state import ServiceInfo
from tests.support.nova_db import NodeSpec, NovaDB, old, utcnow

pytestmark = pytest.mark.integration

SPEC = RequestSpec(flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1))
# refresh_interval 3600: the silent horizon is 9,000 s; a down time this long holds a host
# that beat within 20 s up and out of ``silent``
DOWN_TIME = 9020


class Clock:
    """The cache's monotonic clock, moved on by the test."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.offset


def config(db: NovaDB, down_time: int = DOWN_TIME, **asyncsched: Any) -> Config:
    opts: dict[str, Any] = {"refresh_interval": 3600, "fresh_services_wait": 0.0} | asyncsched
    cfg = db.config(**opts)
    return replace(cfg, default=DefaultOptions(service_down_time=down_time))


def service(cache: HostStateCache, node_uuid: str) -> ServiceInfo | None:
    hs = cache.get_by_uuid(node_uuid)
    assert hs is not None
    return hs.service


def beat(cache: HostStateCache, node_uuid: str) -> datetime | None:
    svc = service(cache, node_uuid)
    assert svc is not None
    return None if svc.last_seen_up is None else as_utc(svc.last_seen_up)


@pytest.fixture
async def hosts(nova_db: NovaDB) -> AsyncIterator[dict[str, Any]]:
    c1, _ = nova_db.cells
    a = await nova_db.add_host(c1, NodeSpec(host="s-a"), last_seen_up=old(5))
    b = await nova_db.add_host(c1, NodeSpec(host="s-b"), last_seen_up=old(5))
    for host in ("s-a", "s-b"):  # not new: a row created within the overlap is read whole
        await nova_db.update_service(c1, host, created_at=old(600))
    yield {"db": nova_db, "c1": c1, "a": a, "b": b}


async def test_a_pass_reads_no_beat_of_an_up_host_and_the_sweep_applies_it(
    hosts: dict[str, Any],
) -> None:
    db: NovaDB = hosts["db"]
    clock = Clock()
    async with HostStateCache(config(db), clock=clock) as cache:
        known = beat(cache, hosts["a"])
        rows, sweeps = cache.metrics["pass_service_rows"], cache.metrics["beat_sweeps"]
        now = utcnow().replace(microsecond=0)  # MySQL's DATETIME
        await db.update_service(hosts["c1"], "s-a", last_seen_up=now, report_count=2)
        await cache.refresh()
        assert beat(cache, hosts["a"]) == known  # a pass between sweeps: no beat read
        assert cache.metrics["pass_service_rows"] == rows
        clock.offset += SWEEP_MAX
        await cache.refresh()
        assert cache.metrics["beat_sweeps"] == sweeps + len(db.cells)  # one a cell
        assert beat(cache, hosts["a"]) == as_utc(now)
        await asyncio.sleep(1.0)  # a later second
        later = utcnow().replace(microsecond=0)
        await db.update_service(hosts["c1"], "s-a", last_seen_up=later, report_count=3)
        clock.offset += SWEEP_MAX
        await cache.refresh()  # every S: the next sweep takes the next beat
        assert cache.metrics["beat_sweeps"] == sweeps + 2 * len(db.cells)
        assert beat(cache, hosts["a"]) == as_utc(later)


async def test_flag_changes_and_new_and_deleted_services_are_seen_by_the_next_pass(
    hosts: dict[str, Any],
) -> None:
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    async with HostStateCache(config(db), clock=Clock()) as cache:
        sweeps = cache.metrics["beat_sweeps"]

        async def flags() -> tuple[bool, bool]:
            await cache.refresh()
            svc = service(cache, hosts["a"])
            assert svc is not None
            return svc.disabled, svc.forced_down

        await db.update_service(c1, "s-a", disabled=True, disabled_reason="maint")
        assert await flags() == (True, False)
        await db.update_service(c1, "s-a", disabled=False, disabled_reason=None)
        assert await flags() == (False, False)
        await db.update_service(c1, "s-a", forced_down=True)
        assert await flags() == (False, True)
        await db.update_service(c1, "s-a", forced_down=False)
        assert await flags() == (False, False)
        new = await db.add_host(c1, NodeSpec(host="s-new"))
        await db.delete_service(c1, "s-b")
        await cache.refresh()
        assert service(cache, new) is not None
        assert cache.get_by_uuid(hosts["b"]) is None
        assert cache.metrics["beat_sweeps"] == sweeps  # no sweep helped


async def test_a_host_entering_silent_is_read_by_id_at_once(hosts: dict[str, Any]) -> None:
    """Its known beat is 18 s old at load (silent at 20 s); it beats, no sweep comes (a slow
    database): when the held sets are next recomputed it enters ``silent`` and its current
    beat is read by id, so the sweep's lateness never makes it look older than it is."""
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    await db.update_service(c1, "s-a", last_seen_up=old(18), updated_at=old(18))
    async with HostStateCache(config(db), clock=Clock()) as cache:
        cell = cache._cells[c1.uuid]  # its held sets: the horizon is made to pass
        sweeps, entered = cache.metrics["beat_sweeps"], cell.fresh.entered_reads
        now = utcnow().replace(microsecond=0)  # MySQL's DATETIME
        await db.update_service(c1, "s-a", last_seen_up=now, report_count=2)
        await asyncio.sleep(2.2)  # the known beat is now older than down time less horizon
        cell.fresh.held_until = 0.0  # the held sets' horizon has passed
        await cache.refresh()
        assert cell.fresh.entered_reads == entered + 1
        assert beat(cache, hosts["a"]) == as_utc(now)
        assert cache.metrics["beat_sweeps"] == sweeps


async def test_a_host_that_stops_beating_is_down_when_down_time_passes(
    hosts: dict[str, Any],
) -> None:
    """service_down_time 8 s (sweeps every 2 s, silent horizon 5 s), the loops running every
    second: a host whose last beat is L is up just before L + 8 s and down just after, as
    nova's servicegroup driver says, though the cache loaded an older beat of it."""
    db: NovaDB = hosts["db"]
    c1 = hosts["c1"]
    await db.update_service(c1, "s-a", last_seen_up=old(6), updated_at=old(6))
    cfg = config(db, down_time=8, refresh_interval=1.0, fresh_services_wait=5.0)
    async with HostStateCache(cfg) as cache:
        last = utcnow().replace(microsecond=0)
        await db.update_service(c1, "s-a", last_seen_up=last, report_count=2)
        filt = ComputeFilter(cfg)

        async def verdict_at(seconds: float) -> str | None:
            await asyncio.sleep(max(0.0, seconds - (utcnow() - last).total_seconds()))
            await cache.fresh_services()
            hs = cache.get_by_uuid(hosts["a"])
            assert hs is not None
            return filt.state_passes(hs, SPEC)

        assert await verdict_at(7.3) is None  # its loaded beat (6 s older) says down
        assert await verdict_at(8.7) == "down"
