"""/readyz's rule over health snapshots: one reason per thing that is not fit."""

from __future__ import annotations

from typing import Any

from asyncsched.admin.readiness import ReadyLimits, not_ready_reasons

from .snapshots import full_snapshot

LIMITS = ReadyLimits(max_state_age=60.0)


def snapshot(**components: Any) -> dict[str, Any]:
    snap = full_snapshot()
    snap["components"].update(components)
    return snap


def test_a_healthy_daemon_is_ready() -> None:
    snap = full_snapshot()
    snap["components"]["hoststate"]["cells"]["u2"]["age"] = 3.0
    assert not_ready_reasons(snap, LIMITS, None) == []


def test_every_cause_is_named() -> None:
    snap = full_snapshot()  # cell2 was last read 90 s ago
    snap["state"] = "starting"
    snap["components"]["rpc"].update(connected=False, last_error="ConnectionRefusedError")
    snap["components"]["placement_mirror"].update(serving=False, reason="mirror 99.0 s old")
    assert not_ready_reasons(snap, LIMITS, "Placement unreachable at http://p") == [
        "service is starting",
        "rpc: not connected to RabbitMQ (ConnectionRefusedError)",
        "hoststate: cell cell2 last read 90.0 s ago (limit 60 s)",
        "placement_mirror: not serving (mirror 99.0 s old)",
        "placement: unreachable: Placement unreachable at http://p",
    ]


def test_loading_consumers_down_and_broken_health() -> None:
    db = {"loaded": False, "age": None, "last_error": None}
    snap = snapshot(
        rpc={"connected": True, "accepting": False},
        hoststate={"api": {**db, "last_error": "timeout"}, "cells": {}},
        placement_mirror={"error": "RuntimeError('x')"},
    )
    assert not_ready_reasons(snap, LIMITS, None) == [
        "rpc: consumers are not up",
        "hoststate: API database not loaded yet (timeout)",
        "placement_mirror: health failed: RuntimeError('x')",
    ]


def test_missing_components_are_not_ready_but_a_missing_mirror_is_fine() -> None:
    snap = {"state": "running", "components": {}}
    assert not_ready_reasons(snap, LIMITS, None) == [
        "rpc: no AMQP consumers configured",
        "hoststate: no host-state cache",
    ]


def test_a_failing_database_is_ready_while_its_state_is_young() -> None:
    snap = full_snapshot()
    cell = snap["components"]["hoststate"]["cells"]["u2"]
    cell.update(age=30.0, stale=True, consecutive_failures=3, last_error="refused")
    assert not_ready_reasons(snap, LIMITS, None) == []
    cell["age"] = 61.0
    assert not_ready_reasons(snap, LIMITS, None) == [
        "hoststate: cell cell2 last read 61.0 s ago (limit 60 s): refused"
    ]
