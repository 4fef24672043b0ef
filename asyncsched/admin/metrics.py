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

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

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

HealthSource = Callable[[], Mapping[str, Any]]
M = TypeVar("M", Counter, Histogram)


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

    def refresh(self, cell: str, kind: str, seconds: float, ok: bool) -> None:
        self.refresh_duration(cell, kind).observe(seconds)
        if not ok:
            self.refresh_failures(cell).inc()


class HealthCollector(Collector):
    """Metric families read from ``Service.health()`` at scrape time.

    Components report counters in their health snapshots already; this only renames them.
    A component missing from the snapshot (no mirror configured) simply yields nothing.
    """

    def __init__(self, health: HealthSource) -> None:
        self._health = health

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on what is configured; never collect() at registration

    def collect(self) -> Iterator[Metric]:
        snapshot = self._health()
        comps: Mapping[str, Any] = snapshot.get("components") or {}
        yield _gauge(
            "asyncsched_up",
            "1 while the service is running (0 starting/stopping).",
            1 if snapshot.get("state") == "running" else 0,
        )
        yield from _rpc(comps.get("rpc"))
        yield from _placement(comps.get("placement"))
        yield from _host_state(comps.get("hoststate"))
        yield from _mirror(comps.get("placement_mirror"), comps.get("candidates"))


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


def _counter(name: str, doc: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, value=value)


def _usable(part: Any) -> Mapping[str, Any] | None:
    return part if isinstance(part, Mapping) and "error" not in part else None


# (stats key, metric name without asyncsched_rpc_ and _total, help)
RPC_COUNTERS = (
    ("received", "messages_received", "Messages taken from RabbitMQ."),
    ("redelivered", "redeliveries", "Messages RabbitMQ delivered again (redelivered flag)."),
    ("duplicates", "duplicates", "Redelivered calls answered from the reply cache or twin."),
    ("malformed", "malformed_messages", "Messages refused as malformed."),
    ("replies", "replies", "Replies the broker confirmed."),
    ("replies_dropped", "replies_dropped", "Replies that could not be delivered."),
    ("publish_retries", "reply_retries", "Reply publishes retried (no reply queue, reconnect)."),
    ("heartbeats", "heartbeats", "Call-monitor heartbeats sent while calls ran."),
    ("reconnects", "reconnects", "Connections to RabbitMQ re-established."),
    ("errors", "errors", "Messages whose handling failed with an internal error."),
)


def _rpc(rpc: Any) -> Iterator[Metric]:
    rpc = _usable(rpc)
    if rpc is None:
        return
    stats = rpc.get("stats") or {}
    for key, name, doc in RPC_COUNTERS:
        yield _counter(f"asyncsched_rpc_{name}_total", doc, stats.get(key, 0))
    yield _gauge("asyncsched_rpc_in_flight", "Messages being handled now.", rpc.get("in_flight", 0))
    yield _gauge(
        "asyncsched_rpc_active_calls",
        "Calls running in the scheduler now.",
        rpc.get("active_calls", 0),
    )
    yield _gauge(
        "asyncsched_rpc_connected",
        "1 while connected to RabbitMQ.",
        int(bool(rpc.get("connected"))),
    )
    yield _gauge(
        "asyncsched_rpc_consuming",
        "1 while the consumers take messages.",
        int(bool(rpc.get("accepting"))),
    )
    yield _gauge(
        "asyncsched_rpc_reply_cache_entries",
        "Answered calls remembered for redeliveries.",
        rpc.get("reply_cache", 0),
    )


PLACEMENT_COUNTERS = (
    ("claims", "claims", "Claims (PUT /allocations) attempted."),
    ("claims_failed", "claims_failed", "Claims that ended refused or failed."),
    ("claim_conflicts", "claim_conflicts", "Provider-generation conflicts retried while claiming."),
    ("errors", "errors", "Placement calls that failed (connection, timeout, 5xx, 401/403)."),
    ("deletes", "deletes", "Allocation deletes (rollbacks)."),
    ("delete_failures", "delete_failures", "Allocation deletes that failed (leaked claims)."),
)


def _placement(placement: Any) -> Iterator[Metric]:
    placement = _usable(placement)
    if placement is None:
        return
    for key, name, doc in PLACEMENT_COUNTERS:
        yield _counter(f"asyncsched_placement_{name}_total", doc, placement.get(key, 0))


def _host_state(cache: Any) -> Iterator[Metric]:
    cache = _usable(cache)
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
    dbs = [("api", cache.get("api") or {})]
    dbs += [(c.get("name") or u, c) for u, c in sorted((cache.get("cells") or {}).items())]
    for name, db in dbs:
        if db.get("age") is not None:
            age.add_metric([name], db["age"])
        failing.add_metric([name], db.get("consecutive_failures", 0))
        stale.add_metric([name], int(bool(db.get("stale"))))
    yield from (age, failing, stale)
    yield _gauge(
        "asyncsched_host_state_hosts", "Compute nodes in the cache.", cache.get("hosts", 0)
    )
    yield _gauge(
        "asyncsched_host_state_assumed",
        "Claimed consumptions not yet reported by computes.",
        cache.get("assumed", 0),
    )
    yield _counter(
        "asyncsched_host_state_full_resyncs",
        "Full reloads of a cell.",
        cache.get("full_resyncs", 0),
    )


def _mirror(mirror: Any, candidates: Any) -> Iterator[Metric]:
    """The Placement mirror and the candidate source, when configured (else nothing)."""
    mirror = _usable(mirror)
    if mirror is not None:
        if mirror.get("age_s") is not None:
            yield _gauge(
                "asyncsched_placement_mirror_age_seconds",
                "Seconds since the mirror last read Placement's database (its lag behind it).",
                mirror["age_s"],
            )
        yield _gauge(
            "asyncsched_placement_mirror_serving",
            "1 while candidates may come from the mirror.",
            int(bool(mirror.get("serving"))),
        )
        yield _gauge(
            "asyncsched_placement_mirror_refresh_seconds",
            "Duration of the last mirror refresh.",
            (mirror.get("refresh_ms_last") or 0) / 1000,
        )
        yield _counter(
            "asyncsched_placement_mirror_refreshes", "Mirror refreshes.", mirror.get("refreshes", 0)
        )
        yield _counter(
            "asyncsched_placement_mirror_refresh_failures",
            "Mirror refreshes that failed.",
            mirror.get("refresh_failures", 0),
        )
    candidates = _usable(candidates)
    if candidates is not None:
        paths = CounterMetricFamily(
            "asyncsched_candidates",
            "Allocation-candidate lookups by source: mirror, or placement (a fallback while "
            "a mirror is configured).",
            labels=["source"],
        )
        for source in ("mirror", "placement"):
            paths.add_metric([source], (candidates.get("paths") or {}).get(source, 0))
        yield paths


def build_registry(health: HealthSource) -> tuple[CollectorRegistry, Metrics]:
    """The daemon's registry: event metrics, the health collector, process metrics."""
    registry = CollectorRegistry(auto_describe=True)
    metrics = Metrics(registry)
    registry.register(HealthCollector(health))
    ProcessCollector(registry=registry)
    return registry, metrics
