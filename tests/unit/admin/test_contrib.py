"""contrib/: the Grafana dashboard and the Prometheus alerts name only metrics we export."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from .snapshots import exercised_registry

ROOT = Path(__file__).resolve().parents[3]
# A metric name in PromQL: ours, or prometheus_client's process collector.
METRIC = re.compile(r"\b(?:asyncsched|process)_[a-z0-9_]+\b")


def exported() -> set[str]:
    """Sample names (``_bucket``/``_count``/``_sum``/``_total`` included) of a full daemon."""
    registry, _ = exercised_registry()
    text = generate_latest(registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def dashboard_exprs() -> list[str]:
    doc: dict[str, Any] = json.loads((ROOT / "contrib/grafana/asyncsched.json").read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in doc["templating"]["list"] if v["type"] == "query"]
    return exprs


def alert_exprs() -> list[str]:
    doc = yaml.safe_load((ROOT / "contrib/prometheus/alerts.yml").read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def test_every_dashboard_expression_names_exported_metrics() -> None:
    names = exported()
    exprs = dashboard_exprs()
    assert len(exprs) >= 10
    for expr in exprs:
        used = METRIC.findall(expr)
        assert used, expr
        assert set(used) <= names, (expr, set(used) - names)


def test_every_alert_names_exported_metrics_and_is_complete() -> None:
    names = exported()
    doc = yaml.safe_load((ROOT / "contrib/prometheus/alerts.yml").read_text())
    rules = [r for g in doc["groups"] for r in g["rules"]]
    for rule in rules:
        used = METRIC.findall(rule["expr"])
        assert used and set(used) <= names, (rule["alert"], set(used) - names)
        assert rule["labels"]["severity"] and rule["annotations"]["summary"]
    alerts = {r["alert"] for r in rules}
    # What the issue asks alerts for: NoValidHost rate, p99 latency, stale cell, Placement
    # errors, loop lag.
    assert {
        "AsyncschedNoValidHostRate",
        "AsyncschedSchedulingLatencyHigh",
        "AsyncschedCellStateStale",
        "AsyncschedPlacementErrors",
        "AsyncschedEventLoopLag",
        "AsyncschedRollbacksPendingTooLong",
    } <= alerts


def test_the_dashboard_covers_what_operators_asked_for() -> None:
    used = {m for e in dashboard_exprs() for m in METRIC.findall(e)}
    for wanted in (
        "asyncsched_select_destinations_duration_seconds_bucket",  # latency percentiles
        "asyncsched_instances_scheduled_total",  # throughput
        "asyncsched_no_valid_host_total",  # NoValidHost reasons
        "asyncsched_placement_claim_conflicts_total",  # claim conflicts
        "asyncsched_host_state_age_seconds",  # cache age
        "asyncsched_placement_mirror_age_seconds",  # mirror age
        "asyncsched_event_loop_lag_seconds_bucket",  # loop lag
        "asyncsched_overcommit_guard_backed_out_total",  # overcommit guard
        "asyncsched_placement_pending_rollback_oldest_age_seconds",  # rollbacks pending
    ):
        assert wanted in used, wanted


def test_the_check_catches_a_misspelt_metric() -> None:
    assert not {"asyncsched_no_valid_hosts_total"} <= exported()
