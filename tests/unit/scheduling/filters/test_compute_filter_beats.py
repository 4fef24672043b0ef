"""ComputeFilter's column path stays exact when heartbeats swap a host's service without a
touch (state/beats.py): the column's heartbeat is then older than the host's, so "down" from
the column is read again from the host, and a host whose heartbeat stops is refused at the
same instant as by the per-host rule."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from asyncsched.scheduling.columns import ColumnView, HostColumns
from asyncsched.scheduling.filters import compute_filter
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.scheduling.servicegroup import heartbeat_ts
from asyncsched.state.beats import keep_seconds, swap_beat
from asyncsched.state.host_state import HostState, ServiceInfo
from tests.support.sched_helpers import NOW, config, host, spec

KEEP = keep_seconds(60, 10, 0.5)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def beat(hs: HostState, seconds: float) -> None:
    """A report at ``at(seconds)`` read by the refresh at that instant."""
    assert hs.service is not None
    new = dataclasses.replace(hs.service, last_seen_up=at(seconds), updated_at=at(seconds))
    if not swap_beat(hs, new, at(seconds), KEEP, 10):
        hs.service = new
        hs.touch()


def verdicts(
    f: ComputeFilter, cols: HostColumns, hosts: list[HostState], now: datetime
) -> list[bool]:
    """The column path's verdicts, checked against the per-host rule at the same instant."""
    mask = f.column_mask()
    assert mask is not None
    ok, _ = mask.run(ColumnView(cols, cols.slots(hosts)), now)
    f.clock = lambda: now
    got = [bool(x) for x in ok]
    assert got == [code is None for code in f.filter_states(hosts, spec())]
    return got


def test_the_column_path_follows_heartbeats_that_moved_no_generation() -> None:
    f = ComputeFilter(config(default={"service_down_time": 60}))
    beating = host("beating", service=ServiceInfo(id=1, host="beating", last_seen_up=at(-10)))
    silent = host("silent", service=ServiceInfo(id=2, host="silent", last_seen_up=at(-10)))
    hosts = [beating, silent]
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    assert verdicts(f, cols, hosts, at(0)) == [True, True]
    for t in (10, 20, 30):  # reported, read, swapped: no generation moved
        beat(beating, t)
    assert beating.generation == 0
    # no report read since (a refresh late): the column still holds the beat of -10, 60 s
    # and more old, "down" there; beating's own is of 30: up
    assert verdicts(f, cols, hosts, at(50)) == [True, True]  # silent: exactly 60 s
    assert verdicts(f, cols, hosts, at(50.5)) == [True, False]
    assert verdicts(f, cols, hosts, at(90)) == [True, False]  # beating's last: 60 s ago
    assert verdicts(f, cols, hosts, at(90.5)) == [False, False]  # it stopped: down now
    beat(silent, 101)  # back up: 111 s since the copy, a touch
    assert silent.generation == 1
    assert verdicts(f, cols, hosts, at(101)) == [False, True]


def test_a_heartbeat_written_back_by_hand_is_refused_at_once() -> None:
    f = ComputeFilter(config(default={"service_down_time": 60}))
    hs = host("h", service=ServiceInfo(id=1, host="h", last_seen_up=at(0)))
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    assert verdicts(f, cols, [hs], at(1)) == [True]
    beat(hs, -120)  # e.g. a test marking the host down: moved back, so a touch
    assert hs.generation == 1
    assert verdicts(f, cols, [hs], at(1)) == [False]


def test_forced_down_and_enabled_are_seen_at_once() -> None:
    f = ComputeFilter(config(default={"service_down_time": 60}))
    svc = ServiceInfo(id=1, host="h", last_seen_up=at(0), disabled=True)
    hs = host("h", service=svc)
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    assert verdicts(f, cols, [hs], at(1)) == [False]
    enabled = dataclasses.replace(svc, disabled=False)
    assert not swap_beat(hs, enabled, at(1), KEEP)  # not a heartbeat: the table touches
    hs.service = enabled
    hs.touch()
    assert verdicts(f, cols, [hs], at(1)) == [True]
    forced = dataclasses.replace(enabled, forced_down=True, last_seen_up=at(1))
    assert not swap_beat(hs, forced, at(1), KEEP)
    hs.service = forced
    hs.touch()
    assert verdicts(f, cols, [hs], at(1)) == [False]


def test_a_dead_hosts_stamp_is_worked_out_once_while_its_service_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worked: list[ServiceInfo | None] = []

    def counted(svc: ServiceInfo | None) -> float:
        worked.append(svc)
        return heartbeat_ts(svc)

    monkeypatch.setattr(compute_filter, "heartbeat_ts", counted)
    f = ComputeFilter(config(default={"service_down_time": 60}))
    dead = [
        host(f"dead{i}", service=ServiceInfo(id=i, host=f"dead{i}", last_seen_up=at(-600)))
        for i in range(3)
    ]
    alive = host("alive", service=ServiceInfo(id=9, host="alive", last_seen_up=at(-10)))
    hosts = [*dead, alive]
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    assert verdicts(f, cols, hosts, at(0)) == [False, False, False, True]
    # the four column rows written, then the three suspects read again from their services
    assert [s.host for s in worked[4:] if s] == ["dead0", "dead1", "dead2"]
    worked.clear()
    assert verdicts(f, cols, hosts, at(1)) == [False, False, False, True]
    assert worked == []  # the same rows, the same service objects: their stamps kept
    old = dead[2].service
    assert old is not None
    dead[2].service = dataclasses.replace(old, last_seen_up=at(-5))  # swapped, no touch
    assert verdicts(f, cols, hosts, at(2)) == [False, False, True, True]
    assert worked == [dead[2].service]  # only the service that changed is read
    worked.clear()
    beat(dead[1], 3)  # back after 600 s: a touch, its row written again and now "up"
    assert verdicts(f, cols, hosts, at(3)) == [False, True, True, True]
    # dead1's row written again; the suspects are other rows now (dead0, dead2): read anew
    assert [s.host for s in worked if s] == ["dead1", "dead0", "dead2"]
