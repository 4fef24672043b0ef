"""Heartbeats swap a host's service without a touch (state/beats.py); every other change of
a services row, a heartbeat that moves back or ahead of the clock, and one the views hold
too old a copy of are touches."""

from __future__ import annotations

import asyncio
import dataclasses
import types
from datetime import UTC, datetime, timedelta
from typing import Any

from asyncsched.objects.models import CellMapping
from asyncsched.state.beats import beat_only, keep_seconds, swap_beat, with_beat
from asyncsched.state.host_state import ChangeLog, HostState, ServiceInfo
from asyncsched.state.index import CellIndex, NodeRead, apply_services, diff_full
from asyncsched.state.readers import BEAT_CHUNK, beat_rows, moved_ids, read_stamped, services_read
from asyncsched.state.table import Cell, HostTable, Live
from tests.support.node_snapshots import CELL, snap
from tests.support.sched_helpers import config

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KEEP = 40.0


def svc(beat: datetime | None, **kw: Any) -> ServiceInfo:
    return ServiceInfo(id=1, host="h1", last_seen_up=beat, updated_at=beat, **kw)


def hs_with(service: ServiceInfo) -> HostState:
    return HostState(uuid="n1", host="h1", nodename="h1", cell_uuid="c1", service=service)


def test_keep_is_a_report_and_two_refreshes_short_of_down_time_at_least_half() -> None:
    assert keep_seconds(60, 10, 2) == 46
    assert keep_seconds(60, 10, 0.5) == 49
    assert keep_seconds(60, 10, 10) == 30
    assert keep_seconds(60, 20, 10) == 30


def test_with_beat_is_replace_of_the_two_stamps() -> None:
    s = ServiceInfo(7, "h", "b", True, "r", True, NOW, NOW, NOW, 66, "u")
    later = NOW + timedelta(seconds=10)
    assert with_beat(s, later, later) == dataclasses.replace(
        s, last_seen_up=later, updated_at=later
    )


def test_only_the_heartbeat_stamps_may_change() -> None:
    old = svc(NOW)
    assert beat_only(old, svc(NOW + timedelta(seconds=10)))
    assert beat_only(old, svc(NOW))  # the same beat read again
    assert not beat_only(old, svc(NOW - timedelta(seconds=1)))  # moved back
    assert not beat_only(old, svc(None))
    for change in (
        {"disabled": True},
        {"forced_down": True},
        {"disabled_reason": "x"},
        {"version": 70},
        {"uuid": "u"},
        {"created_at": NOW},
        {"binary": "other"},
    ):
        assert not beat_only(old, svc(NOW + timedelta(seconds=10), **change)), change


def test_a_forward_heartbeat_is_swapped_without_a_touch() -> None:
    hs = hs_with(svc(NOW - timedelta(seconds=10)))
    new = svc(NOW)
    assert swap_beat(hs, new, NOW, KEEP)
    assert hs.service is new and hs.generation == 0


def test_a_heartbeat_ahead_of_the_clock_or_moved_back_is_a_touch() -> None:
    hs = hs_with(svc(NOW - timedelta(seconds=10)))
    assert not swap_beat(hs, svc(NOW + timedelta(seconds=1)), NOW, KEEP)
    assert not swap_beat(hs, svc(NOW - timedelta(seconds=70)), NOW, KEEP)
    assert hs.service == svc(NOW - timedelta(seconds=10))  # the caller touches


def test_the_views_copy_older_than_keep_makes_the_next_heartbeat_a_touch() -> None:
    first = NOW
    hs = hs_with(svc(first))  # the views were built with this one (generation 0)
    t = first
    for _ in range(3):  # reports every 10 s, no touch: the floor stays at the first beat
        t += timedelta(seconds=10)
        assert swap_beat(hs, svc(t), t, KEEP)
        assert hs.beat_floor == (0, first)
    t += timedelta(seconds=15)  # now 45 s past the views' copy, KEEP is 40
    assert not swap_beat(hs, svc(t), t, KEEP)
    hs.service = svc(t)
    hs.touch()  # what the table does: the views read this beat at their next rebuild
    t += timedelta(seconds=10)
    assert swap_beat(hs, svc(t), t, KEEP)
    assert hs.beat_floor == (1, t - timedelta(seconds=10))


def test_a_full_read_swaps_heartbeats_and_rebuilds_other_service_changes() -> None:
    index = CellIndex()
    a, b = snap("na", "a"), snap("nb", "b")
    sa = ServiceInfo(id=1, host="a", last_seen_up=NOW)
    sb = ServiceInfo(id=2, host="b", last_seen_up=NOW)
    index.snaps = {"na": a, "nb": b}
    index.services = {"a": sa, "b": sb}
    table = {
        "na": HostState(uuid="na", host="a", nodename="na", cell_uuid=CELL, service=sa),
        "nb": HostState(uuid="nb", host="b", nodename="nb", cell_uuid=CELL, service=sb),
    }
    later = NOW + timedelta(seconds=10)
    services = [
        (1, "a", dataclasses.replace(sa, last_seen_up=later)),
        (2, "b", dataclasses.replace(sb, last_seen_up=later, disabled=True)),
    ]
    read = NodeRead(snaps={"na": a, "nb": b}, live={"na", "nb"})
    beats: dict[str, str] = {}
    assert diff_full(index, table, services, read, {}, None, beats) == {"nb"}
    assert beats == {"na": "a"}


async def test_the_table_swaps_a_heartbeat_and_touches_a_disable() -> None:
    now = datetime.now(UTC)
    table = HostTable(Live(config(), lambda: 0.0, {}, False))
    cell = Cell(mapping=CellMapping(uuid="c1"), db=None)  # type: ignore[arg-type]
    table.cells["c1"] = cell
    log = ChangeLog()
    hs = HostState(
        uuid="n1",
        host="h1",
        nodename="h1",
        cell_uuid="c1",
        service=svc(now - timedelta(seconds=10)),
        changes=log,
    )
    cell.table["n1"] = hs
    mark = log.mark()
    cell.index.services["h1"] = beat = svc(now)
    await table.swap_services(cell, {"n1": "h1"})
    assert hs.service is beat and hs.generation == 0 and log.since(mark) == []
    cell.index.services["h1"] = off = svc(now, disabled=True)
    await table.swap_services(cell, {"n1": "h1"})
    assert hs.service is off and hs.generation == 1 and log.since(mark) == [hs]
    cell.index.services["h1"] = back = svc(now - timedelta(seconds=30), disabled=True)
    await table.swap_services(cell, {"n1": "h1"})  # written back by hand: a touch
    assert hs.service is back and hs.generation == 2


async def test_a_changed_row_with_the_signature_applied_is_read_narrow() -> None:
    """services_by_id rows carry the signature; a changed row whose narrow read shows the
    same one is a heartbeat (no whole row); another signature or an unknown id is read
    whole."""
    index = CellIndex()
    naive = NOW.replace(tzinfo=None)
    whole = {
        "id": 1, "uuid": "u1", "host": "h1", "binary": "nova-compute", "disabled": False,
        "disabled_reason": None, "forced_down": False, "last_seen_up": naive,
        "created_at": naive, "updated_at": naive, "version": 66, "deleted": 0,
        "deleted_at": None, "sig": "s1", "stamp": "t0",
    }  # fmt: skip
    read = await services_read(index, [whole])
    (_, _, applied) = read.rows[0]
    assert applied is not None and index.service_sigs[1] == ("s1", applied)
    later = naive + timedelta(seconds=10)
    beats = beat_rows(
        index,
        [
            (1, later, later, "t1", "s1"),  # a heartbeat (MySQL: naive)
            (2, later, later, "t1", "s2"),  # never read whole
        ],
    )
    assert beats.whole == [2]
    ((sid, host, svc),) = beats.rows
    assert (sid, host) == (1, "h1") and svc is not None
    assert svc == dataclasses.replace(applied, last_seen_up=later.replace(tzinfo=UTC),
                                      updated_at=later.replace(tzinfo=UTC))  # fmt: skip
    assert beats.stamps == {1: "t1"}
    assert index.service_sigs[1] == ("s1", svc)
    row = (1, later, later, "t1", "other")
    assert beat_rows(index, [row]).whole == [1]


def test_a_beat_read_again_unchanged_is_the_service_held() -> None:
    """The watermark's overlap reads a row again: the same beat (aware on PostgreSQL, naive
    on MySQL) gives the ServiceInfo already held, so nothing is swapped; a later beat gives
    a new one."""
    index = CellIndex()
    held = ServiceInfo(1, "h1", last_seen_up=NOW, created_at=NOW, updated_at=NOW, version=66)
    index.service_sigs[1] = ("s1", held)
    index.services["h1"] = held
    naive = NOW.replace(tzinfo=None)
    for beat in (NOW, naive):
        again = beat_rows(index, [(1, beat, beat, "t0", "s1")])
        assert again.rows == [(1, "h1", held)] and again.stamps == {1: "t0"}
        assert apply_services(index, again.rows) == (set(), set())
    later = NOW + timedelta(seconds=10)
    moved = beat_rows(index, [(1, later, NOW, "t1", "s1")])
    ((_, _, svc),) = moved.rows
    assert svc is not held and svc == with_beat(held, later, NOW)
    assert apply_services(index, moved.rows) == (set(), {"h1"})
    assert index.services["h1"] is svc and index.service_sigs[1] == ("s1", svc)


def test_moved_ids_are_new_stamps_or_recent_ones() -> None:
    known = {1: "t0", 2: "t0", 3: "t0"}
    changed = [
        (1, "t0", False),  # applied, older than the last read
        (2, "t1", False),  # a new stamp
        (3, "t0", True),  # applied, but of the last read's second: may have changed since
        (4, "t0", False),  # never applied
    ]
    assert moved_ids(known, changed) == [2, 3, 4]


def test_a_host_reporting_further_apart_is_touched_sooner() -> None:
    t = NOW + timedelta(seconds=32)  # both: the views' copy is of NOW, 32 s old
    regular = hs_with(svc(NOW))
    regular.service = svc(NOW + timedelta(seconds=22))
    regular.beat_floor = (0, NOW)
    assert swap_beat(regular, svc(t), t, KEEP, report=10)  # 10 s apart: 32 <= 40
    slow = hs_with(svc(NOW))  # its last report 32 s ago: the next may be 32 s on
    assert not swap_beat(slow, svc(t), t, KEEP, report=10)  # 32 > 40 - 22: a touch


async def test_a_sweep_turns_a_cells_beats_into_values_in_pieces() -> None:
    """A sweep reads every beat of a cell (10,000 rows): they become values BEAT_CHUNK rows
    at a time, the event loop given a turn between two pieces; the result is the one-piece
    one."""
    n = 3 * BEAT_CHUNK + 5
    index = CellIndex()
    for i in range(1, n + 1):
        held = ServiceInfo(i, f"h{i}", last_seen_up=NOW, created_at=NOW, updated_at=NOW)
        index.service_sigs[i] = ("s", held)
        index.services[f"h{i}"] = held
    later = NOW + timedelta(seconds=10)
    rows = [(i, later, later, f"t{i}", "s") for i in range(1, n + 1)]

    async def fetch(sql: str, *args: Any) -> list[Any]:
        return rows

    db: Any = types.SimpleNamespace(fetch=fetch, sql=types.SimpleNamespace(services_beats="q"))
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            await asyncio.sleep(0)
            turns += 1

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = turns
    read = await read_stamped(db, index, [(i, f"t{i}", False) for i in range(1, n + 1)])
    during = turns - before
    tick.cancel()
    assert len(read.rows) == n and read.stamps == {i: f"t{i}" for i in range(1, n + 1)}
    assert all(svc is not None and svc.last_seen_up == later for _, _, svc in read.rows)
    assert during >= 3  # one turn between each two of the four pieces
