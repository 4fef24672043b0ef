"""Every Prometheus metric asyncsched exports, defined here and nowhere else.

Two sources, one registry (owned by the daemon, never the global one):

* :class:`Metrics` is the :class:`~asyncsched.common.recorder.Recorder` the layers are given:
  histograms and counters of things seen as they happen (request and phase durations,
  Placement calls, NoValidHost causes, refresh passes).
* :class:`HealthCollector` turns the counters and gauges components already keep (their
  ``health()`` snapshots) into metric families at scrape time, so nothing else is threaded
  through the layers and a scrape costs one snapshot.

Conventions: ``asyncsched_`` prefix, seconds, ``_total`` counters, and label values from small
fixed sets (never a host, instance or request id).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from asyncsched.common import heap
from asyncsched.common.health import ServiceHealth, Snapshot
from asyncsched.placement.health import GuardHealth, PendingHealth, PlacementHealth
from asyncsched.rpc.server import RPCHealth
from asyncsched.rpc.stats import RPCStats
from asyncsched.scheduling.candidates.source import CandidatesHealth
from asyncsched.state.health import DatabaseHealth, HostStateHealth, MirrorHealth

# Request latency: sub-millisecond decisions up to nova's 60 s rpc_response_timeout.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
LOOP_LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

HealthSource = Callable[[], ServiceHealth]
M = TypeVar("M", Counter, Histogram)
S = TypeVar("S", bound=Snapshot)


class Labelled(Generic[M]):
    """``metric.labels(*values)`` resolved once per value tuple: ``labels()`` takes a lock and
    builds its key on every call (5 µs here); our values come from small fixed sets."""

    def __init__(self, metric: M) -> None:
        self.metric: M = metric
        self._children: dict[tuple[str, ...], M] = {}

    def __call__(self, *values: str) -> M:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self.metric.labels(*values)
        return child


class Metrics:
    """The Prometheus-backed Recorder, registered on the daemon's registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def hist(name: str, doc: str, labels: tuple[str, ...]) -> Labelled[Histogram]:
            return Labelled(
                Histogram(name, doc, labels, registry=registry, buckets=LATENCY_BUCKETS)
            )

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, registry=registry)

        def counters(name: str, doc: str, labels: tuple[str, ...]) -> Labelled[Counter]:
            return Labelled(Counter(name, doc, labels, registry=registry))

        self.select_duration = hist(
            "asyncsched_select_destinations_duration_seconds",
            "select_destinations from message to confirmed reply, by outcome.",
            ("outcome",),
        )
        self.phase_duration = hist(
            "asyncsched_select_destinations_phase_seconds",
            "Time one select_destinations spent per phase (candidates, decide, claim, reply).",
            ("phase",),
        )
        self.rpc_calls = counters(
            "asyncsched_rpc_calls_total",
            "RPC calls answered anew (not from the reply cache), by method and outcome.",
            ("method", "outcome"),
        )
        self.instances = counter(
            "asyncsched_instances_scheduled_total", "Instances given a host (and claimed)."
        )
        self.nvh = counters(
            "asyncsched_no_valid_host_total",
            "NoValidHost answers, by the filter that emptied the host list, or by cause "
            "(placement_no_candidates, placement_error, request, claims, "
            "not_enough_hosts, chance_driver).",
            ("filter",),
        )
        self.replaced = counter(
            "asyncsched_claims_replaced_total",
            "Instances whose claim Placement refused, decided again on another host.",
        )
        self.rollbacks = counter(
            "asyncsched_claim_rollbacks_total", "Failed requests that deleted their claims."
        )
        self.rolled_back = counter(
            "asyncsched_claims_rolled_back_total", "Claims deleted by those rollbacks."
        )
        self.placement = hist(
            "asyncsched_placement_request_duration_seconds",
            "Placement HTTP calls by call and status class (2xx, 4xx, 5xx, error).",
            ("call", "status"),
        )
        self.refresh_duration = hist(
            "asyncsched_host_state_refresh_duration_seconds",
            "One host-state pass over one database (cell name, or api), by kind.",
            ("cell", "kind"),
        )
        self.refresh_failures = counters(
            "asyncsched_host_state_refresh_failures_total",
            "Host-state passes that failed, per database (cell name, or api).",
            ("cell",),
        )
        self.loop_lag = Histogram(
            "asyncsched_event_loop_lag_seconds",
            "How late the event loop woke a timer: time every task waited for the loop.",
            registry=registry,
            buckets=LOOP_LAG_BUCKETS,
        )
        self.gc_pause = Labelled(
            Histogram(
                "asyncsched_gc_pause_seconds",
                "Cyclic garbage-collector runs by generation (0, 1, 2): each holds the event "
                "loop for its whole duration.",
                ("generation",),
                registry=registry,
                buckets=LOOP_LAG_BUCKETS,
            )
        )

    # ---- Recorder ----

    def rpc_call(self, method: str, outcome: str, seconds: float) -> None:
        self.rpc_calls(method, outcome).inc()
        if method == "select_destinations":
            self.select_duration(outcome).observe(seconds)

    def phase(self, phase: str, seconds: float) -> None:
        self.phase_duration(phase).observe(seconds)

    def scheduled(self, instances: int) -> None:
        self.instances.inc(instances)

    def no_valid_host(self, reason: str) -> None:
        self.nvh(reason).inc()

    def claim_replaced(self) -> None:
        self.replaced.inc()

    def rollback(self, claims: int) -> None:
        self.rollbacks.inc()
        self.rolled_back.inc(claims)

    def placement_call(self, call: str, status: str, seconds: float) -> None:
        self.placement(call, status).observe(seconds)

    def gc_paused(self, generation: int, seconds: float) -> None:
        self.gc_pause(str(generation)).observe(seconds)

    def refresh(self, cell: str, kind: str, seconds: float, ok: bool) -> None:
        self.refresh_duration(cell, kind).observe(seconds)
        if not ok:
            self.refresh_failures(cell).inc()


@dataclass(frozen=True)  # no slots: a generic alias call sets __orig_class__
class Scalar(Generic[S]):
    """One number a component's ``health()`` snapshot (an ``S``) holds, exported as ``name``.

    ``get`` reads it (a field the type checker knows). A counter read as None is 0; a gauge
    read as None (an age never measured) is left out.
    """

    get: Callable[[S], float | None]
    name: str
    doc: str
    counter: bool = False
    scale: float = 1.0


@dataclass(frozen=True)
class Part(Generic[S]):
    """Where a snapshot is in ``Service.health()`` (``find``: None when the component is
    absent, not configured or its health() failed: nothing exported) and what it exports."""

    find: Callable[[ServiceHealth], S | None]
    scalars: tuple[Scalar[S], ...]

    def collect(self, snapshot: ServiceHealth) -> Iterator[Metric]:
        part = self.find(snapshot)
        if part is None:
            return
        for s in self.scalars:
            value = s.get(part)
            if s.counter:
                yield CounterMetricFamily(s.name, s.doc, value=float(value or 0) * s.scale)
            elif value is not None:
                yield GaugeMetricFamily(s.name, s.doc, value=float(value) * s.scale)


_Rpc = Scalar[RPCHealth]
_Placement = Scalar[PlacementHealth]
_Guard = Scalar[GuardHealth]
_Pending = Scalar[PendingHealth]
_HostState = Scalar[HostStateHealth]
_Mirror = Scalar[MirrorHealth]


def _rpc_stat(get: Callable[[RPCStats], int], name: str, doc: str) -> Scalar[RPCHealth]:
    """An RPC counter, read from ``RPCHealth.stats`` by attribute."""
    return _Rpc(lambda h: get(h.stats), name, doc, counter=True)


def _placement(s: ServiceHealth) -> PlacementHealth | None:
    return s.part("placement", PlacementHealth)


def _guard(s: ServiceHealth) -> GuardHealth | None:
    p = _placement(s)
    return None if p is None else p.overcommit_guard


def _pending(s: ServiceHealth) -> PendingHealth | None:
    p = _placement(s)
    return None if p is None else p.pending_rollbacks


# fmt: off
RPC = Part[RPCHealth](lambda s: s.part("rpc", RPCHealth), (
    _rpc_stat(lambda s: s.received, "asyncsched_rpc_messages_received",
              "Messages taken from RabbitMQ."),
    _rpc_stat(lambda s: s.redelivered, "asyncsched_rpc_redeliveries",
              "Messages RabbitMQ redelivered."),
    _rpc_stat(lambda s: s.duplicates, "asyncsched_rpc_duplicates",
              "Redelivered calls answered from the reply cache or their running twin."),
    _rpc_stat(lambda s: s.malformed, "asyncsched_rpc_malformed_messages",
              "Messages refused, malformed."),
    _rpc_stat(lambda s: s.replies, "asyncsched_rpc_replies", "Replies the broker confirmed."),
    _rpc_stat(lambda s: s.replies_dropped, "asyncsched_rpc_replies_dropped",
              "Replies that could not be delivered."),
    _rpc_stat(lambda s: s.publish_retries, "asyncsched_rpc_reply_retries",
              "Reply publishes retried (no reply queue yet, reconnect)."),
    _rpc_stat(lambda s: s.heartbeats, "asyncsched_rpc_heartbeats", "Call-monitor heartbeats sent."),
    _rpc_stat(lambda s: s.reconnects, "asyncsched_rpc_reconnects",
              "RabbitMQ connections re-established."),
    _rpc_stat(lambda s: s.errors, "asyncsched_rpc_errors", "Messages that hit an internal error."),
    _Rpc(lambda h: h.in_flight, "asyncsched_rpc_in_flight", "Messages being handled now."),
    _Rpc(lambda h: h.active_calls, "asyncsched_rpc_active_calls", "Calls in the scheduler now."),
    _Rpc(lambda h: h.connected, "asyncsched_rpc_connected", "1 while connected to RabbitMQ."),
    _Rpc(lambda h: h.accepting, "asyncsched_rpc_consuming",
         "1 while the consumers take messages."),
    _Rpc(lambda h: h.reply_cache, "asyncsched_rpc_reply_cache_entries",
         "Answered calls remembered for redeliveries."),
))
PLACEMENT = Part[PlacementHealth](_placement, (
    _Placement(lambda h: h.claims, "asyncsched_placement_claims",
               "Claims (PUT /allocations) attempted.", counter=True),
    _Placement(lambda h: h.claims_failed, "asyncsched_placement_claims_failed",
               "Claims that ended refused or failed.", counter=True),
    _Placement(lambda h: h.claim_conflicts, "asyncsched_placement_claim_conflicts",
               "Provider-generation conflicts retried while claiming.", counter=True),
    _Placement(lambda h: h.errors, "asyncsched_placement_errors",
               "Placement calls that failed (connection, timeout, 5xx, 401/403).", counter=True),
    _Placement(lambda h: h.deletes, "asyncsched_placement_deletes",
               "Allocation deletes (rollbacks).", counter=True),
    _Placement(lambda h: h.delete_failures, "asyncsched_placement_delete_failures",
               "Allocation deletes that failed (leaked claims).", counter=True),
    _Placement(lambda h: h.fenced, "asyncsched_placement_fenced_undos",
               "Undos Placement refused on the consumer generation: another writer's now, left "
               "alone.", counter=True),
))
GUARD = Part[GuardHealth](_guard, (
    _Guard(lambda h: h.confirmed, "asyncsched_overcommit_guard_confirmed",
           "Claims the overcommit guard found within capacity (kept).", counter=True),
    _Guard(lambda h: h.raced, "asyncsched_overcommit_guard_raced",
           "Claims found over capacity at the first look (a concurrent claim elsewhere).",
           counter=True),
    _Guard(lambda h: h.kept_after_race, "asyncsched_overcommit_guard_kept_after_race",
           "Raced claims whose providers fit again after the pause (kept).", counter=True),
    _Guard(lambda h: h.backed_out, "asyncsched_overcommit_guard_backed_out",
           "Raced claims still over capacity, backed out to decide the instance again.",
           counter=True),
    _Guard(lambda h: h.foreign_over, "asyncsched_overcommit_guard_foreign_over",
           "Providers found over capacity in resource classes the claim does not use.",
           counter=True),
    _Guard(lambda h: h.unchecked, "asyncsched_overcommit_guard_unchecked",
           "Provider usages the guard could not read (claim kept as Placement accepted it).",
           counter=True),
))
PENDING = Part[PendingHealth](_pending, (
    _Pending(lambda h: h.pending, "asyncsched_placement_pending_rollbacks",
             "Rollbacks Placement could not take yet, journaled and retried."),
    _Pending(lambda h: h.oldest_age_s, "asyncsched_placement_pending_rollback_oldest_age_seconds",
             "Age of the oldest pending rollback (absent while none is pending)."),
    _Pending(lambda h: h.done, "asyncsched_placement_pending_rollbacks_done",
             "Pending rollbacks completed once Placement answered.", counter=True),
    _Pending(lambda h: h.dropped, "asyncsched_placement_pending_rollbacks_dropped",
             "Pending rollbacks left alone: the consumer holds other allocations by then.",
             counter=True),
))
HOST_STATE = Part[HostStateHealth](lambda s: s.part("hoststate", HostStateHealth), (
    _HostState(lambda h: h.hosts, "asyncsched_host_state_hosts", "Compute nodes in the cache."),
    _HostState(lambda h: h.assumed, "asyncsched_host_state_assumed",
               "Claimed consumptions not yet reported by the computes."),
    _HostState(lambda h: h.full_resyncs, "asyncsched_host_state_full_resyncs",
               "Full reloads of a cell.", counter=True),
    _HostState(lambda h: h.beat_sweeps, "asyncsched_host_state_beat_sweeps",
               "Refresh passes of a cell that read every heartbeat.", counter=True),
    _HostState(lambda h: h.pass_service_rows, "asyncsched_host_state_pass_service_rows",
               "Services rows applied by the refresh passes.", counter=True),
))
MIRROR = Part[MirrorHealth](lambda s: s.part("placement_mirror", MirrorHealth), (
    _Mirror(lambda h: h.age_s, "asyncsched_placement_mirror_age_seconds",
            "Seconds since the mirror last read Placement's database (its lag behind it)."),
    _Mirror(lambda h: h.serving, "asyncsched_placement_mirror_serving",
            "1 while candidates may come from the mirror."),
    _Mirror(lambda h: h.refresh_ms_last, "asyncsched_placement_mirror_refresh_seconds",
            "Duration of the last mirror refresh.", scale=0.001),
    _Mirror(lambda h: h.refreshes, "asyncsched_placement_mirror_refreshes", "Mirror refreshes.",
            counter=True),
    _Mirror(lambda h: h.providers_over_capacity,
            "asyncsched_placement_mirror_providers_over_capacity",
            "Providers whose allocations exceed their capacity now, whoever claimed them."),
    _Mirror(lambda h: h.over_capacity_found, "asyncsched_placement_mirror_over_capacity_found",
            "Providers seen going over capacity.", counter=True),
    _Mirror(lambda h: h.refresh_failures, "asyncsched_placement_mirror_refresh_failures",
            "Mirror refreshes that failed.", counter=True),
))
PARTS: tuple[Part[Any], ...] = (RPC, PLACEMENT, GUARD, PENDING, HOST_STATE, MIRROR)
# fmt: on


class HealthCollector(Collector):
    """Metric families read from ``Service.health()`` at scrape time.

    Components report counters in their health snapshots already; this only renames them
    (``PARTS``), plus the per-database host-state families and the candidate sources.
    """

    def __init__(self, health: HealthSource) -> None:
        self._health = health

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on what is configured; never collect() at registration

    def collect(self) -> Iterator[Metric]:
        snapshot = self._health()
        yield GaugeMetricFamily(
            "asyncsched_up",
            "1 while the service is running (0 starting/stopping).",
            value=1 if snapshot.state == "running" else 0,
        )
        yield GaugeMetricFamily(
            "asyncsched_gc_frozen_objects",
            "Objects out of the cyclic collector's reach: the start-up heap and what large "
            "builds kept since (falls as they are freed).",
            value=gc.get_freeze_count(),
        )
        yield CounterMetricFamily(
            "asyncsched_gc_heap_freezes",
            "Times the young heap was frozen after large builds (common/heap.py).",
            value=heap.KEEPER.freezes,
        )
        for part in PARTS:
            yield from part.collect(snapshot)
        yield from _databases(snapshot.part("hoststate", HostStateHealth))
        yield from _candidates(snapshot.part("candidates", CandidatesHealth))


def _databases(cache: HostStateHealth | None) -> Iterator[Metric]:
    """Per database (a cell's name, or ``api``): age of the last good read, failures, stale."""
    if cache is None:
        return
    age = GaugeMetricFamily(
        "asyncsched_host_state_age_seconds",
        "Seconds since the last good read, per database (cell name, or api).",
        labels=["cell"],
    )
    failing = GaugeMetricFamily(
        "asyncsched_host_state_consecutive_failures",
        "Failed passes in a row, per database (cell name, or api).",
        labels=["cell"],
    )
    stale = GaugeMetricFamily(
        "asyncsched_host_state_stale",
        "1 while a database is failing or not loaded (decisions use its last good state).",
        labels=["cell"],
    )
    dbs: list[tuple[str, DatabaseHealth]] = [("api", cache.api)]
    dbs += [(c.name or u, c) for u, c in sorted(cache.cells.items())]
    for name, db in dbs:
        if db.age is not None:
            age.add_metric([name], db.age)
        failing.add_metric([name], db.consecutive_failures)
        stale.add_metric([name], int(db.stale))
    yield from (age, failing, stale)


def _candidates(candidates: CandidatesHealth | None) -> Iterator[Metric]:
    """Where allocation candidates came from, when a candidate source is configured."""
    if candidates is None:
        return
    paths = CounterMetricFamily(
        "asyncsched_candidates",
        "Allocation-candidate lookups by source: mirror, or placement (a fallback while a "
        "mirror is configured).",
        labels=["source"],
    )
    for source in ("mirror", "placement"):
        paths.add_metric([source], candidates.paths.get(source, 0))
    yield paths
    waits = CounterMetricFamily(
        "asyncsched_candidates_refusal_waits",
        "Instances placed again after Placement refused their claim, by whether the retry "
        "saw the mirror's refresh the refusal asked for (refreshed) or gave up at the bound "
        "(timeout).",
        labels=["outcome"],
    )
    waits.add_metric(["refreshed"], candidates.refusal_waits - candidates.refusal_timeouts)
    waits.add_metric(["timeout"], candidates.refusal_timeouts)
    yield waits


def build_registry(health: HealthSource) -> tuple[CollectorRegistry, Metrics]:
    """The daemon's registry: event metrics, the health collector, process metrics."""
    registry = CollectorRegistry(auto_describe=True)
    metrics = Metrics(registry)
    registry.register(HealthCollector(health))
    ProcessCollector(registry=registry)
    return registry, metrics
