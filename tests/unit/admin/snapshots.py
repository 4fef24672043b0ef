"""A Service.health() snapshot with every component the collector reads, and a registry
where every recorded metric has a sample: what "the daemon exports" means in tests."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from asyncsched.admin.metrics import Metrics, build_registry
from asyncsched.common.health import ServiceHealth
from tests.support import health


def full_snapshot() -> ServiceHealth:
    db = health.database(loaded=True, stale=False, age=2.5, consecutive_failures=0)
    return health.service(
        rpc=health.rpc(
            connected=True,
            accepting=True,
            in_flight=3,
            active_calls=2,
            reply_cache=7,
            stats={
                "received": 11,
                "redelivered": 1,
                "duplicates": 1,
                "malformed": 2,
                "replies": 9,
                "publish_retries": 4,
                "reconnects": 1,
            },
        ),
        placement=health.placement(
            claims=5,
            claims_failed=1,
            claim_conflicts=2,
            errors=3,
            overcommit_guard=health.guard(
                confirmed=40, raced=6, backed_out=4, kept_after_race=2, foreign_over=1, unchecked=3
            ),
            pending_rollbacks=health.pending(
                pending=2,
                oldest_age_s=912.5,
                done=7,
                dropped=1,
                journal="/var/lib/asyncsched/pending-rollbacks.json",
                last_error="Placement unreachable",
            ),
        ),
        hoststate=health.host_state(
            api=db,
            cells={
                "u1": health.cell("cell1", age=4.0),
                "u2": health.cell("cell2", age=90.0, stale=True, consecutive_failures=6),
            },
            hosts=24,
            assumed=2,
            full_resyncs=3,
        ),
        placement_mirror=health.mirror(
            serving=True, age_s=1.5, refresh_ms_last=12.0, refreshes=40, refresh_failures=1
        ),
        candidates=health.candidates(
            paths={"mirror": 30, "placement": 4}, refusal_waits=5, refusal_timeouts=1
        ),
    )


def exercised_registry(
    snapshot: ServiceHealth | None = None,
) -> tuple[CollectorRegistry, Metrics]:
    """A registry over ``snapshot`` where each Recorder method was called once."""
    shown = snapshot if snapshot is not None else full_snapshot()
    registry, metrics = build_registry(lambda: shown)
    metrics.rpc_call("select_destinations", "ok", 0.02)
    metrics.phase("candidates", 0.01)
    metrics.scheduled(3)
    metrics.no_valid_host("ComputeFilter")
    metrics.claim_replaced()
    metrics.rollback(2)
    metrics.placement_call("claim", "2xx", 0.01)
    metrics.refresh("cell1", "incremental", 0.005, ok=False)
    metrics.loop_lag.observe(0.001)
    return registry, metrics
