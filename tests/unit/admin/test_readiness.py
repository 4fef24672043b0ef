"""/readyz's rule over health snapshots: one reason per thing that is not fit."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from asyncsched.admin.readiness import ReadyLimits, not_ready_reasons
from asyncsched.common.health import ServiceHealth
from asyncsched.state.health import HostStateHealth
from tests.support import health

from .snapshots import full_snapshot

LIMITS = ReadyLimits(max_state_age=60.0)


def _cell2(snap: ServiceHealth, **over: Any) -> ServiceHealth:
    """``snap`` with cell u2 of the host state changed."""
    cache = snap.part("hoststate", HostStateHealth)
    assert cache is not None
    cells = {**cache.cells, "u2": replace(cache.cells["u2"], **over)}
    return health.with_part(snap, hoststate=replace(cache, cells=cells))


def test_a_healthy_daemon_is_ready() -> None:
    snap = _cell2(full_snapshot(), age=3.0)
    assert not_ready_reasons(snap, LIMITS, None) == []


def test_every_cause_is_named() -> None:
    snap = full_snapshot()  # cell2 was last read 90 s ago
    snap = health.with_part(
        ServiceHealth("starting", snap.components),
        rpc=health.rpc(connected=False, last_error="ConnectionRefusedError"),
        placement_mirror=health.mirror(serving=False, reason="mirror 99.0 s old"),
    )
    assert not_ready_reasons(snap, LIMITS, "Placement unreachable at http://p") == [
        "service is starting",
        "rpc: not connected to RabbitMQ (ConnectionRefusedError)",
        "hoststate: cell cell2 last read 90.0 s ago (limit 60 s)",
        "placement_mirror: not serving (mirror 99.0 s old)",
        "placement: unreachable: Placement unreachable at http://p",
    ]


def test_loading_consumers_down_and_broken_health() -> None:
    db = health.database(loaded=False, age=None, last_error="timeout")
    snap = health.with_part(
        full_snapshot(),
        rpc=health.rpc(connected=True, accepting=False),
        hoststate=health.host_state(api=db, cells={}),
        placement_mirror=health.failed("RuntimeError('x')"),
    )
    assert not_ready_reasons(snap, LIMITS, None) == [
        "rpc: consumers are not up",
        "hoststate: API database not loaded yet (timeout)",
        "placement_mirror: health failed: RuntimeError('x')",
    ]


def test_missing_components_are_not_ready_but_a_missing_mirror_is_fine() -> None:
    snap = health.service("running")
    assert not_ready_reasons(snap, LIMITS, None) == [
        "rpc: no AMQP consumers configured",
        "hoststate: no host-state cache",
    ]


def test_a_component_reporting_the_wrong_snapshot_is_named_not_trusted() -> None:
    snap = health.with_part(full_snapshot(), hoststate=health.rpc())
    assert not_ready_reasons(snap, LIMITS, None) == [
        "hoststate: health failed: unexpected RPCHealth"
    ]


def test_a_failing_database_is_ready_while_its_state_is_young() -> None:
    snap = _cell2(
        full_snapshot(), age=30.0, stale=True, consecutive_failures=3, last_error="refused"
    )
    assert not_ready_reasons(snap, LIMITS, None) == []
    snap = _cell2(snap, age=61.0)
    assert not_ready_reasons(snap, LIMITS, None) == [
        "hoststate: cell cell2 last read 61.0 s ago (limit 60 s): refused"
    ]
