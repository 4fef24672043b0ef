"""The host-state cache's health snapshots (``HostStateCache.health()`` and its parts).

Typed so the admin endpoint's metrics and readiness (``admin/metrics.py``,
``admin/readiness.py``) read fields the type checker knows; the JSON they publish is
``Snapshot.as_json()``: the same keys, in the same order, as the dicts these replaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from asyncsched.common.health import Snapshot


@dataclass(frozen=True, slots=True)
class DatabaseHealth(Snapshot):
    """One database (the API database, or a cell's): staleness, age, retry state."""

    stale: bool
    age: float | None  # seconds since the last good read
    loaded: bool
    consecutive_failures: int
    read_failures: int
    down_for: float | None
    retry_in: float | None  # None before the database exists (cache not started)
    last_error: str | None
    address: str | None  # MySQL: the address in use (several: a Galera cluster)


@dataclass(frozen=True, slots=True)
class ImagePropsHealth(Snapshot):
    wanted: bool
    loaded: bool
    instances: int
    images: int
    last_error: str | None


@dataclass(frozen=True, slots=True)
class HeldServices(Snapshot):
    """Services a cell's per-request read asks for because the cache holds them so."""

    disabled: int
    forced_down: int
    silent: int


@dataclass(frozen=True, slots=True)
class FreshHealth(Snapshot):
    """A cell's per-request services reads (``state.fresh``)."""

    ok: bool
    last_error: str | None
    held: HeldServices


@dataclass(frozen=True, slots=True)
class CellHealth(DatabaseHealth):
    name: str | None
    hosts: int
    last_full_age: float | None
    image_props: ImagePropsHealth
    services_fresh: FreshHealth


@dataclass(frozen=True, slots=True)
class HostStateHealth(Snapshot):
    """``HostStateCache.health()``: staleness per database, counts, the cache's counters."""

    ok: bool
    ready: bool
    stale: bool
    api: DatabaseHealth
    cells: Mapping[str, CellHealth]  # by cell uuid
    unusable_cells: Mapping[str, str]  # enabled cells that cannot be loaded: uuid -> why
    hosts: int
    aggregates: int
    assumed: int
    assumed_unfit: int
    assumptions_confirmed: int
    assumptions_expired: int
    assumptions_released: int
    assumptions_refitted: int
    assumptions_unfit: int
    refresh_passes: int
    full_resyncs: int
    beat_sweeps: int
    pass_service_rows: int
    refresh_failures: int
    image_props_reads: int
    image_props_failures: int
    services_fresh_reads: int
    services_fresh_failures: int
    services_fresh_skipped: int


@dataclass(frozen=True, slots=True)
class MirrorHealth(Snapshot):
    """``PlacementMirror.health()``: whether candidates may come from it, its age, refreshes."""

    database: str  # redacted
    serving: bool
    reason: str | None  # why not serving
    providers: int
    age_s: float | None  # seconds since the last read of Placement's database
    interval_s: float
    max_age_s: float
    load_ms: float | None
    refreshes: int
    on_demand_refreshes: int
    refresh_failures: int
    refresh_ms_last: float
    refresh_ms_p50: float | None
    refresh_ms_max: float
    last_changed_providers: int
    last_allocation_rows_moved: int
    pending_claims: int
    last_error: str | None
    guard_usage_queries: int
    providers_over_capacity: int
    over_capacity_found: int
