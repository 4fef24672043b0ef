"""ComputeFilter's column path stays exact when heartbeats swap a host's service without a
touch (state/beats.py): the column's heartbeat is then older than the host's, so "down" from
the column is read again from the host, and a host whose heartbeat stops is refused at the
same instant as by the per-host rule."""

from __future__ import annotations

import dataclasses
import random
from datetime import datetime, timedelta

import pytest

from asyncsched.scheduling.columns import ColumnView, HostColumns
from asyncsched.scheduling.filters import compute_filter
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.scheduling.servicegroup import heartbeat_ts
from asyncsched.state.beats import hidden_beats_horizon, keep_seconds, swap_beat
from asyncsched.state.host_state import HostState, ServiceInfo
from tests.support.sched_helpers import NOW, config, host, spec

KEEP = keep_seconds(60, 10, 0.5)


def at(seconds: float) -> datetime:
    return NOW + timedelta(seconds=seconds)


def beat(hs: HostState, seconds: float) -> None:
    """A report at ``at(seconds)`` read by the refresh at that instant."""
    read(hs, seconds, seconds)


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


def test_a_down_hosts_stamp_is_worked_out_once_while_its_service_stays(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    worked = counting(monkeypatch)
    f = ComputeFilter(config(default={"service_down_time": 60}))
    down = [
        host(f"down{i}", service=ServiceInfo(id=i, host=f"down{i}", last_seen_up=at(-90)))
        for i in range(3)
    ]
    alive = host("alive", service=ServiceInfo(id=9, host="alive", last_seen_up=at(-10)))
    hosts = [*down, alive]
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    assert verdicts(f, cols, hosts, at(0)) == [False, False, False, True]
    # the four column rows written, then the three suspects read again from their services
    assert [s.host for s in worked[4:] if s] == ["down0", "down1", "down2"]
    worked.clear()
    assert verdicts(f, cols, hosts, at(1)) == [False, False, False, True]
    assert worked == []  # the same rows, the same service objects: their stamps kept
    old = down[2].service
    assert old is not None
    down[2].service = dataclasses.replace(old)  # an equal value in another object
    assert verdicts(f, cols, hosts, at(2)) == [False, False, False, True]
    assert worked == [down[2].service]  # only the service that changed is read
    worked.clear()
    beat(down[1], 3)  # back after 93 s: a touch, its row written again and now "up"
    assert verdicts(f, cols, hosts, at(3)) == [False, True, False, True]
    # down1's row written again; the suspects are other rows now (down0, down2): read anew
    assert [s.host for s in worked if s] == ["down1", "down0", "down2"]


def test_a_host_down_past_the_horizon_is_not_read_again(monkeypatch: pytest.MonkeyPatch) -> None:
    worked = counting(monkeypatch)
    f = ComputeFilter(config(default={"service_down_time": 60}))
    assert hidden_beats_horizon(60) == 120 >= KEEP + 60
    dead = host("dead", service=ServiceInfo(id=1, host="dead", last_seen_up=at(-120)))
    never = host("never", service=ServiceInfo(id=2, host="never"))  # no beat, no created_at
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    assert verdicts(f, cols, [dead, never], at(0)) == [False, False]
    assert len(worked) == 3  # dead's row, read again (exactly at the horizon), never's row
    worked.clear()
    assert verdicts(f, cols, [dead, never], at(0.5)) == [False, False]
    assert worked == []  # past the horizon: no swap can hide a beat; never: nothing to swap
    beat(dead, 1)  # a beat after 121 s is a touch: the row itself says "up"
    assert verdicts(f, cols, [dead, never], at(1)) == [True, False]


@pytest.mark.parametrize("seed", range(40))
def test_the_column_path_agrees_with_the_per_host_rule_under_random_beats(seed: int) -> None:
    """Computes report every 10 s, some stop for a while (up to three down times) and come
    back; the refresher reads the reports late and at random (swap or touch, as the table
    does), requests come at random: every request's column verdicts are the per-host rule's
    (``verdicts`` asserts it)."""
    rng = random.Random(seed)
    f = ComputeFilter(config(default={"service_down_time": 60}))
    hosts = [
        host(f"h{i}", service=ServiceInfo(id=i, host=f"h{i}", last_seen_up=at(0))) for i in range(8)
    ]
    cols = HostColumns(columns=ComputeFilter.column_mask(f).columns)  # type: ignore[union-attr]
    quiet = {h.host: (rng.uniform(0, 300), rng.uniform(0, 180)) for h in hosts}  # from, for
    t = 0.0
    while t < 600:
        t += rng.uniform(0.5, 15)
        if rng.random() < 0.5:
            verdicts(f, cols, hosts, at(t))
            continue
        for h in hosts:  # a refresh: each host's last report before t, if it reported
            start, length = quiet[h.host]
            last = (t // 10) * 10
            if start <= last < start + length:
                last = (start // 10) * 10
            read(h, last, t)
    verdicts(f, cols, hosts, at(t))


def read(hs: HostState, seconds: float, now: float) -> None:
    """A report of ``at(seconds)`` read by a refresh at ``at(now)``: swapped, or a touch."""
    assert hs.service is not None
    new = dataclasses.replace(hs.service, last_seen_up=at(seconds), updated_at=at(seconds))
    if not swap_beat(hs, new, at(now), KEEP, 10):
        hs.service = new
        hs.touch()


def counting(monkeypatch: pytest.MonkeyPatch) -> list[ServiceInfo | None]:
    """The services whose stamps ComputeFilter works out (column rows and reads again)."""
    worked: list[ServiceInfo | None] = []

    def counted(svc: ServiceInfo | None) -> float:
        worked.append(svc)
        return heartbeat_ts(svc)

    monkeypatch.setattr(compute_filter, "heartbeat_ts", counted)
    return worked
