"""The exported text, parsed back with prometheus_client's parser: names, labels, values."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any, TypeVar

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from asyncsched.admin.metrics import GUARD, PENDING, Part, build_registry
from asyncsched.common.health import ServiceHealth
from asyncsched.placement.health import GuardHealth, PendingHealth, PlacementHealth
from asyncsched.rpc.server import RPCHealth
from tests.support import health

from .snapshots import exercised_registry, full_snapshot

S = TypeVar("S", GuardHealth, PendingHealth)


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(got: dict[Any, float], name: str, **labels: str) -> float:
    return got[(name, tuple(sorted(labels.items())))]


def test_counters_components_keep_are_read_at_scrape_time() -> None:
    snap = full_snapshot()
    shown = [snap]
    registry, _ = build_registry(lambda: shown[0])
    got = samples(generate_latest(registry))
    assert value(got, "asyncsched_up") == 1
    assert value(got, "asyncsched_rpc_messages_received_total") == 11
    assert value(got, "asyncsched_rpc_redeliveries_total") == 1
    assert value(got, "asyncsched_rpc_malformed_messages_total") == 2
    assert value(got, "asyncsched_rpc_reply_retries_total") == 4
    assert value(got, "asyncsched_rpc_replies_dropped_total") == 0  # absent = 0
    assert value(got, "asyncsched_rpc_in_flight") == 3
    assert value(got, "asyncsched_placement_claims_total") == 5
    assert value(got, "asyncsched_placement_claim_conflicts_total") == 2
    assert value(got, "asyncsched_host_state_age_seconds", cell="api") == 2.5
    assert value(got, "asyncsched_host_state_age_seconds", cell="cell2") == 90.0
    assert value(got, "asyncsched_host_state_stale", cell="cell2") == 1
    assert value(got, "asyncsched_host_state_consecutive_failures", cell="cell2") == 6
    assert value(got, "asyncsched_placement_mirror_age_seconds") == 1.5
    assert value(got, "asyncsched_candidates_total", source="placement") == 4
    waits = "asyncsched_candidates_refusal_waits_total"
    assert value(got, waits, outcome="refreshed") == 4
    assert value(got, waits, outcome="timeout") == 1
    assert value(got, "asyncsched_overcommit_guard_backed_out_total") == 4
    assert value(got, "asyncsched_overcommit_guard_raced_total") == 6
    assert value(got, "asyncsched_overcommit_guard_foreign_over_total") == 1
    assert value(got, "asyncsched_placement_pending_rollbacks") == 2
    assert value(got, "asyncsched_placement_pending_rollback_oldest_age_seconds") == 912.5
    assert value(got, "asyncsched_placement_pending_rollbacks_done_total") == 7
    assert value(got, "asyncsched_placement_pending_rollbacks_dropped_total") == 1
    # A later scrape sees the new values: nothing is cached.
    rpc = snap.part("rpc", RPCHealth)
    assert rpc is not None
    shown[0] = health.with_part(
        ServiceHealth("stopping", snap.components),
        rpc=replace(rpc, stats=replace(rpc.stats, received=12)),
    )
    got = samples(generate_latest(registry))
    assert value(got, "asyncsched_rpc_messages_received_total") == 12
    assert value(got, "asyncsched_up") == 0


def test_absent_or_broken_components_yield_nothing() -> None:
    snap = health.service("starting", rpc=health.failed("RuntimeError()"))
    registry, _ = build_registry(lambda: snap)
    names = {name for name, _ in samples(generate_latest(registry))}
    assert not any(n.startswith(("asyncsched_rpc_", "asyncsched_placement_mirror")) for n in names)
    assert "asyncsched_up" in names


def test_recorded_events() -> None:
    registry, metrics = exercised_registry()
    metrics.rpc_call("select_destinations", "no_valid_host", 0.5)
    metrics.rpc_call("ping", "ok", 0.001)
    got = samples(generate_latest(registry))
    count = "asyncsched_select_destinations_duration_seconds_count"
    assert value(got, count, outcome="ok") == 1
    assert value(got, count, outcome="no_valid_host") == 1
    assert value(got, "asyncsched_rpc_calls_total", method="ping", outcome="ok") == 1
    # ping is counted as a call but adds nothing to the select_destinations latency
    assert sum(v for (n, _), v in got.items() if n == count) == 2
    assert value(got, "asyncsched_instances_scheduled_total") == 3
    assert value(got, "asyncsched_no_valid_host_total", filter="ComputeFilter") == 1
    assert value(got, "asyncsched_claim_rollbacks_total") == 1
    assert value(got, "asyncsched_claims_rolled_back_total") == 2
    assert (
        value(
            got, "asyncsched_placement_request_duration_seconds_count", call="claim", status="2xx"
        )
        == 1
    )
    assert value(got, "asyncsched_host_state_refresh_failures_total", cell="cell1") == 1
    assert value(got, "asyncsched_event_loop_lag_seconds_count") == 1
    assert value(got, "process_resident_memory_bytes") > 0


def test_no_label_names_an_instance_host_or_request() -> None:
    registry, _ = exercised_registry()
    labels = {k for _, lbl in samples(generate_latest(registry)) for k, _ in lbl}
    assert labels <= {"outcome", "phase", "method", "filter", "call", "status", "cell", "kind",
                      "source", "le"}  # fmt: skip


def test_guard_off_and_nothing_pending_export_no_guard_series_and_no_age() -> None:
    """The guard disabled (health None): no guard series at all, rather than zeros; no
    rollback pending: the count is 0 and the age series is absent (nothing to be old)."""
    snap = full_snapshot()
    placement = snap.part("placement", PlacementHealth)
    assert placement is not None and placement.pending_rollbacks is not None
    placement = replace(
        placement,
        overcommit_guard=None,
        pending_rollbacks=replace(placement.pending_rollbacks, pending=0, oldest_age_s=None),
    )
    snap = health.with_part(snap, placement=placement)
    registry, _ = build_registry(lambda: snap)
    got = samples(generate_latest(registry))
    names = {name for name, _ in got}
    assert not any(n.startswith("asyncsched_overcommit_guard_") for n in names)
    assert "asyncsched_placement_pending_rollback_oldest_age_seconds" not in names
    assert value(got, "asyncsched_placement_pending_rollbacks") == 0
    assert value(got, "asyncsched_placement_claims_total") == 5  # the rest of placement stays


def test_every_number_the_guard_and_the_rollbacks_report_is_exported() -> None:
    """Each number of both snapshots is read by one of their metrics: a field added there
    and not exported here shows up (every field set to a different number)."""
    _every_number_read(GUARD, GuardHealth)
    _every_number_read(PENDING, PendingHealth)


def _every_number_read(part: Part[S], kind: type[S]) -> None:
    text = {"journal", "last_error"}
    numbers = [f.name for f in fields(kind) if f.name not in text]
    values: dict[str, Any] = {name: i for i, name in enumerate(numbers, 1)}
    texts: dict[str, Any] = {f.name: None for f in fields(kind) if f.name in text}
    snap = kind(**values, **texts)
    assert {s.get(snap) for s in part.scalars} == set(values.values()), kind
