"""Typed health snapshots for tests: every field filled (a healthy, idle default), any field
given by keyword. What ``health()`` returns, without the component behind it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asyncsched.common.health import HealthFailed, ServiceHealth, Snapshot
from asyncsched.placement.health import GuardHealth, PendingHealth, PlacementHealth
from asyncsched.rpc.server import RPCHealth
from asyncsched.rpc.stats import RPCStats
from asyncsched.scheduling.candidates.source import CandidatesHealth
from asyncsched.state.health import (
    CellHealth,
    DatabaseHealth,
    FreshHealth,
    HeldServices,
    HostStateHealth,
    ImagePropsHealth,
    MirrorHealth,
)


def database(**over: Any) -> DatabaseHealth:
    return DatabaseHealth(
        **{
            "stale": False,
            "age": 2.5,
            "loaded": True,
            "consecutive_failures": 0,
            "read_failures": 0,
            "down_for": None,
            "retry_in": 0.1,
            "last_error": None,
            "address": None,
            **over,
        }
    )


def cell(name: str | None, **over: Any) -> CellHealth:
    db = {f.name: getattr(database(), f.name) for f in dataclasses.fields(DatabaseHealth)}
    return CellHealth(
        **{
            **db,
            "name": name,
            "hosts": 0,
            "last_full_age": None,
            "image_props": ImagePropsHealth(
                wanted=False, loaded=False, instances=0, images=0, last_error=None
            ),
            "services_fresh": FreshHealth(
                ok=True, last_error=None, held=HeldServices(disabled=0, forced_down=0, silent=0)
            ),
            **over,
        }
    )


def host_state(
    api: DatabaseHealth | None = None, cells: Mapping[str, CellHealth] | None = None, **over: Any
) -> HostStateHealth:
    counters = {
        f.name: 0
        for f in dataclasses.fields(HostStateHealth)
        if f.name.startswith(
            ("assum", "refresh_", "full_", "image_", "services_", "beat_", "pass_")
        )
    }
    return HostStateHealth(
        **{
            "ok": True,
            "ready": True,
            "stale": False,
            "api": api if api is not None else database(),
            "cells": dict(cells or {}),
            "unusable_cells": {},
            "hosts": 0,
            "aggregates": 0,
            **counters,
            **over,
        }
    )


def rpc(*, stats: Mapping[str, int] | RPCStats | None = None, **over: Any) -> RPCHealth:
    """``stats``: an ``RPCStats``, or counters by name (the rest 0)."""
    return RPCHealth(
        stats=stats if isinstance(stats, RPCStats) else RPCStats(**(stats or {})),
        **{
            "connected": True,
            "accepting": True,
            "broker": None,
            "virtual_host": "/",
            "queues": [],
            "prefetch": 0,
            "in_flight": 0,
            "active_calls": 0,
            "reply_cache": 0,
            "cast_cache": 0,
            "reply_cache_bytes": 0,
            "held_bytes": 0,
            "replies_pending": 0,
            "last_error": None,
            **over,
        },
    )


def guard(**over: Any) -> GuardHealth:
    zero = {f.name: 0 for f in dataclasses.fields(GuardHealth)}
    return GuardHealth(**{**zero, **over})


def pending(**over: Any) -> PendingHealth:
    return PendingHealth(
        **{
            "pending": 0,
            "oldest_age_s": None,
            "done": 0,
            "dropped": 0,
            "journal": None,
            "last_error": None,
            **over,
        }
    )


def placement(**over: Any) -> PlacementHealth:
    return PlacementHealth(
        **{
            "endpoint": "http://placement",
            "started": True,
            "max_version": "1.39",
            "calls": 0,
            "errors": 0,
            "claims": 0,
            "claim_conflicts": 0,
            "claims_failed": 0,
            "deletes": 0,
            "delete_failures": 0,
            "fenced": 0,
            "last_error": None,
            "last_error_age_s": None,
            "last_ok_age_s": None,
            "last_duration_ms": {},
            "claim_batches": None,
            "overcommit_guard": None,
            "pending_rollbacks": None,
            **over,
        }
    )


def mirror(**over: Any) -> MirrorHealth:
    return MirrorHealth(
        **{
            "database": "postgresql://placement",
            "serving": True,
            "reason": None,
            "providers": 0,
            "age_s": 1.0,
            "interval_s": 1.0,
            "max_age_s": 30.0,
            "load_ms": None,
            "refreshes": 0,
            "on_demand_refreshes": 0,
            "refresh_failures": 0,
            "refresh_ms_last": 0.0,
            "refresh_ms_p50": None,
            "refresh_ms_max": 0.0,
            "last_changed_providers": 0,
            "last_allocation_rows_moved": 0,
            "pending_claims": 0,
            "last_error": None,
            "guard_usage_queries": 0,
            "providers_over_capacity": 0,
            "over_capacity_found": 0,
            **over,
        }
    )


def candidates(**over: Any) -> CandidatesHealth:
    return CandidatesHealth(
        **{
            "source": "mirror",
            "why_not_mirror": None,
            "paths": {},
            "fallback_reasons": {},
            "last_path": None,
            "last_local_ms": 0.0,
            "get_calls": 0,
            "get_shared": 0,
            "refusal_waits": 0,
            "refusal_timeouts": 0,
            **over,
        }
    )


def failed(error: str) -> HealthFailed:
    return HealthFailed(error)


def service(state: str = "running", **components: Snapshot) -> ServiceHealth:
    return ServiceHealth(state, dict(components))


def with_part(snapshot: ServiceHealth, **components: Snapshot) -> ServiceHealth:
    """``snapshot`` with the named components replaced (or added)."""
    return ServiceHealth(snapshot.state, {**snapshot.components, **components})


@dataclass(frozen=True, slots=True)
class Nothing(Snapshot):
    """A fake component's health: nothing to report (JSON ``{}``)."""


@dataclass(frozen=True, slots=True)
class Up(Snapshot):
    """A fake component's health: ``{"ok": ...}``."""

    ok: bool
