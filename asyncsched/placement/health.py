"""The Placement client's health snapshots (``PlacementClient.health()`` and its parts).

Typed so the admin endpoint's metrics read fields the type checker knows; the JSON is
``Snapshot.as_json()``, the same keys in the same order as the dicts these replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from asyncsched.common.health import Snapshot


@dataclass(frozen=True, slots=True)
class GuardHealth(Snapshot):
    """``OvercommitGuard.health()``: what the overcommit guard found, claim by claim."""

    confirmed: int
    raced: int
    backed_out: int
    kept_after_race: int
    foreign_over: int
    unchecked: int


@dataclass(frozen=True, slots=True)
class PendingHealth(Snapshot):
    """``PendingRollbacks.health()``: rollbacks Placement could not take yet."""

    pending: int
    oldest_age_s: float | None
    done: int
    dropped: int
    journal: str | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class PlacementHealth(Snapshot):
    """``PlacementClient.health()``: the endpoint, call and claim counters, last error."""

    endpoint: str
    started: bool
    max_version: str | None
    calls: int
    errors: int
    claims: int
    claim_conflicts: int
    claims_failed: int
    deletes: int
    delete_failures: int
    fenced: int
    last_error: str | None
    last_error_age_s: float | None
    last_ok_age_s: float | None
    last_duration_ms: Mapping[str, float]
    claim_batches: Mapping[str, int] | None  # coalesce.CoalescerStats
    overcommit_guard: GuardHealth | None
    pending_rollbacks: PendingHealth | None
