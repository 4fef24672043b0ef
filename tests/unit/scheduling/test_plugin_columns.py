"""Plugins own their vectorised form: a third-party filter or weigher gets the fast path by
declaring it, and a subclass that changes the rule falls back to the per-host methods."""

from __future__ import annotations

import random
from collections import Counter
from datetime import datetime

import pytest

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.columns import (
    BoolArray,
    Column,
    ColumnMask,
    ColumnView,
    HostColumns,
    attribute,
)
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.aggregate_io_ops_filter import AggregateIoOpsFilter
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.scheduling.filters.io_ops_filter import IoOpsFilter
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.scheduling.weighers.ram import RAMWeigher
from asyncsched.state.host_state import ChangeLog
from tests.support.sched_helpers import NOW, config, host, spec

#: a third party's column: RAM per vCPU left on the host
RAM_PER_CPU = Column("acme_ram_per_cpu", lambda s: s.free_ram_mb / max(1, s.vcpus_total))


class AcmeRamPerCpuFilter(BaseHostFilter):
    """Passes hosts with at least 1024 MiB free per vCPU; only the column form may run."""

    name = "AcmeRamPerCpuFilter"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        raise AssertionError("the engine should use the column mask")

    def column_mask(self) -> ColumnMask | None:
        return ColumnMask((RAM_PER_CPU,), self._mask)

    @staticmethod
    def _mask(view: ColumnView, now: datetime) -> tuple[BoolArray, Counter[str]]:
        ok = view[RAM_PER_CPU] >= 1024
        return ok, Counter({"acme-ram": int((~ok).sum())})


class AcmeRamPerCpuWeigher(BaseHostWeigher):
    """More RAM per vCPU wins; ``weigh_states`` must not be needed."""

    name = "AcmeRamPerCpuWeigher"
    column = RAM_PER_CPU  # declared in the class itself, so the override below keeps it

    def weigh_states(self, states: object, spec: RequestSpec) -> list[float]:
        raise AssertionError("the engine should read the column")


def _engine(filters: list[BaseHostFilter], weighers: list[BaseHostWeigher]) -> DecisionEngine:
    conf = config()
    return DecisionEngine(conf, filters, weighers, clock=lambda: NOW, rng=random.Random(1))


def test_third_party_filter_and_weigher_run_on_columns() -> None:
    conf = config()
    hosts = [
        host("small", free_ram_mb=2048, vcpus_total=4),  # 512 per vCPU: filtered out
        host("mid", free_ram_mb=8192, vcpus_total=4),  # 2048
        host("big", free_ram_mb=16384, vcpus_total=4),  # 4096: weighs most
    ]
    eng = _engine([AcmeRamPerCpuFilter(conf)], [AcmeRamPerCpuWeigher(conf)])
    assert RAM_PER_CPU in eng.columns.columns
    req = eng.start(hosts)
    s = spec()
    assert req.filter(s, 0) == 2
    assert req.reasons == {"AcmeRamPerCpuFilter": Counter({"acme-ram": 1})}
    assert hosts[req.pick(s).chosen_index].host == "big"
    # the per-host form of a column weigher reads the same rule
    assert AcmeRamPerCpuWeigher(conf).weigh(HostCandidate(hosts[1]), s) == 2048.0


def test_column_rows_follow_the_host_generation() -> None:
    conf = config()
    h = host("a", free_ram_mb=2048, vcpus_total=4)
    eng = _engine([AcmeRamPerCpuFilter(conf)], [])
    s = spec()
    assert eng.start([h]).filter(s, 0) == 0
    h.free_ram_mb = 8192
    h.touch()
    assert eng.start([h]).filter(s, 0) == 1


def test_subclass_changing_the_rule_loses_the_fast_path() -> None:
    conf = config()
    assert IoOpsFilter(conf).column_mask() is not None
    assert AggregateIoOpsFilter(conf).column_mask() is None  # per-aggregate limit

    class Scaled(RAMWeigher):
        def weigh_states(self, states: object, spec: RequestSpec) -> list[float]:
            return [0.0]

    assert RAMWeigher.column is attribute("free_ram_mb")
    assert Scaled.column is None


def test_two_different_columns_may_not_share_a_name() -> None:
    cols = HostColumns(columns=[attribute("free_ram_mb")])
    cols.register([attribute("free_ram_mb")])  # the same column again is fine
    with pytest.raises(ValueError, match="free_ram_mb"):
        cols.register([Column("free_ram_mb", lambda s: 0.0)])


def test_compute_filter_mask_matches_its_per_host_rule() -> None:
    from datetime import timedelta

    from asyncsched.scheduling.filters.compute_filter import ComputeFilter
    from asyncsched.state.host_state import ServiceInfo

    naive_now = NOW.replace(tzinfo=None)
    services: dict[str, ServiceInfo | None] = {
        "up": ServiceInfo(id=1, host="up", last_seen_up=NOW - timedelta(seconds=10)),
        "naive-up": ServiceInfo(id=2, host="naive-up", last_seen_up=naive_now),
        "created-only": ServiceInfo(id=3, host="created-only", created_at=NOW),
        "no-beat": ServiceInfo(id=4, host="no-beat"),
        "stale": ServiceInfo(id=5, host="stale", last_seen_up=NOW - timedelta(seconds=61)),
        "future": ServiceInfo(id=6, host="future", last_seen_up=NOW + timedelta(seconds=61)),
        "edge": ServiceInfo(id=7, host="edge", last_seen_up=NOW - timedelta(seconds=60)),
        "forced": ServiceInfo(id=8, host="forced", last_seen_up=NOW, forced_down=True),
        "disabled": ServiceInfo(id=9, host="disabled", last_seen_up=NOW, disabled=True),
        "none": None,
    }
    hosts = [host(name, service=svc) for name, svc in services.items()]
    hosts[-1].service = None  # host() fills in a service when given None
    conf = config(default={"service_down_time": 60})
    f = ComputeFilter(conf, clock=lambda: NOW)
    per_host = f.filter_states(hosts, spec())
    assert dict(zip(services, per_host, strict=True)) == {
        "up": None,
        "naive-up": None,
        "created-only": None,
        "no-beat": "down",
        "stale": "down",
        "future": "down",
        "edge": None,  # exactly service_down_time away is still up
        "forced": "down",
        "disabled": "disabled",
        "none": "no-service",
    }
    mask = f.column_mask()
    assert mask is not None
    cols = HostColumns(columns=mask.columns)
    ok, reasons = mask.run(ColumnView(cols, cols.slots(hosts)), NOW)
    assert ok.tolist() == [code is None for code in per_host]
    assert reasons == Counter(code for code in per_host if code is not None)


def test_a_column_registered_later_is_filled_for_known_hosts() -> None:
    hosts = [host("a", free_ram_mb=1024, num_io_ops=3), host("b", free_ram_mb=2048)]
    cols = HostColumns(columns=[attribute("free_ram_mb")])
    slots = cols.slots(hosts)
    cols.register([attribute("num_io_ops")])  # e.g. SIGHUP enabled IoOpsWeigher
    assert cols.num["num_io_ops"][cols.slots(hosts)].tolist() == [3.0, 0.0]
    assert cols.num["free_ram_mb"][slots].tolist() == [1024.0, 2048.0]


def test_the_same_host_list_keeps_its_rows_and_still_rebuilds_changed_hosts() -> None:
    hosts = [host(f"h{i}", free_ram_mb=1000 + i) for i in range(5)]
    cols = HostColumns(columns=[attribute("free_ram_mb")])
    first = cols.slots(hosts)
    assert cols.slots(hosts) is first  # the kept view's list: its rows are kept
    hosts[2].free_ram_mb = 7
    hosts[2].touch()
    again = cols.slots(hosts)
    assert cols.num["free_ram_mb"][again].tolist() == [1000, 1001, 7, 1003, 1004]
    cols.forget_missing(hosts[1:])  # rows renumbered
    fresh = cols.slots(hosts[1:])
    assert cols.num["free_ram_mb"][fresh].tolist() == [1001, 7, 1003, 1004]
    other = list(hosts)  # an equal but different list: looked up afresh
    assert cols.slots(other).tolist() != [] and cols.slots(other) is not fresh


def test_with_a_changelog_only_touched_hosts_are_looked_at() -> None:
    log = ChangeLog(limit=4)
    hosts = [host(f"h{i}", free_ram_mb=1000 + i, changes=log) for i in range(5)]
    cols = HostColumns(columns=[attribute("free_ram_mb")])
    first = cols.slots(hosts)
    hosts[3].free_ram_mb = 3
    hosts[3].touch()
    # A generation moved behind the log's back: a scan of every host would rebuild this row,
    # the log does not name it, so it is not looked at.
    hosts[1].free_ram_mb = 1
    hosts[1].generation += 1
    again = cols.slots(hosts)
    assert again is first
    assert cols.num["free_ram_mb"][again].tolist() == [1000, 1001, 1002, 3, 1004]
    for h in hosts:  # the log (limit 4) starts over: every host is compared once
        h.free_ram_mb += 10
        h.touch()
    assert log.since((0, 0)) is None
    assert cols.num["free_ram_mb"][cols.slots(hosts)].tolist() == [1010, 11, 1012, 13, 1014]
    without = [host(f"n{i}", free_ram_mb=500) for i in range(2)]  # no log: the scan as before
    cols.slots(without)
    without[0].free_ram_mb = 5
    without[0].generation += 1
    assert cols.num["free_ram_mb"][cols.slots(without)].tolist() == [5, 500]


def test_a_new_list_reads_the_changelog_not_every_generation() -> None:
    """A new list of known hosts (the host view after a host filled up) rebuilds the rows
    of the hosts the log names and writes the rows of hosts never seen, without comparing
    every host's generation."""
    log = ChangeLog()
    hosts = [host(f"h{i}", free_ram_mb=1000 + i, changes=log) for i in range(6)]
    cols = HostColumns(columns=[attribute("free_ram_mb")])
    cols.slots(hosts)
    hosts[4].free_ram_mb = 4
    hosts[4].touch()
    hosts[2].free_ram_mb = 2
    hosts[2].generation += 1  # behind the log's back: not looked at, so not rebuilt
    joined = host("h6", free_ram_mb=6, changes=log)
    view = [*hosts[1:], joined]  # h0 gone, h6 joined: a new list
    assert cols.num["free_ram_mb"][cols.slots(view)].tolist() == [1001, 1002, 1003, 4, 1005, 6]
    hosts[5].free_ram_mb = 5
    hosts[5].touch()
    assert cols.num["free_ram_mb"][cols.slots(list(hosts))].tolist() == [
        1000,
        1001,
        1002,
        1003,
        4,
        5,
    ]


def test_a_full_compare_of_some_hosts_does_not_vouch_for_the_others() -> None:
    """After rows were voided (a column registered), comparing a sub-list makes only its rows
    current: a later list with the other hosts must still rebuild theirs."""
    log = ChangeLog()
    hosts = [host(f"h{i}", free_ram_mb=1000 + i, num_io_ops=i, changes=log) for i in range(6)]
    cols = HostColumns(columns=[attribute("free_ram_mb")])
    cols.slots(hosts)
    cols.register([attribute("num_io_ops")])  # every row void
    cols.slots(hosts[:3])
    assert cols.num["num_io_ops"][cols.slots(list(hosts))].tolist() == [0, 1, 2, 3, 4, 5]
