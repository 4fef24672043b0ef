"""Decisions that differed from nova 34's, each on the minimal case the parity suite
(tests/parity) found, now decided as nova decides them."""

from __future__ import annotations

from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.metrics_filter import MetricsFilter
from asyncsched.scheduling.metrics_setting import parse_setting
from asyncsched.scheduling.weighers.metrics import MetricsWeigher

from .sched_helpers import config, host, spec


def test_weight_setting_names_are_kept_as_written() -> None:
    assert parse_setting(("cpu.percent =1.0", "cpu.frequency= 2", "=3", "x")) == [
        ("cpu.percent ", 1.0),
        ("cpu.frequency", 2.0),
    ]
    conf = config(metrics={"weight_setting": ("cpu.percent =1.0",), "required": False})
    reporting = host("h1", metrics={"cpu.percent": 50})
    # nova looks for a metric named "cpu.percent " which no host reports
    assert MetricsFilter(conf).state_passes(reporting, spec()) == "metrics"
    other = host("h2", metrics={"cpu.percent": 10})
    weights = DecisionEngine(conf, [], [MetricsWeigher(conf)]).start([reporting, other])
    assert weights.weigh(spec()).tolist() == [0.0, 0.0]  # both "unavailable": no preference
