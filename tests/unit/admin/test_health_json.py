"""The health document (``/v1/status``, the health file) keeps its shape.

Every component's ``health()`` became a typed snapshot (#23); what the admin endpoint and the
health file publish is its JSON form, which must keep the keys, nesting and order of the dicts
it replaced. The expected trees below were printed from those dicts (main at 835b20d) for the
daemon ``build_daemon`` wires with every optional part on, before it starts.
"""

from __future__ import annotations

import json
from typing import Any

from asyncsched.app import build_daemon
from asyncsched.conf.options import (
    ApiDatabaseOptions,
    AsyncschedOptions,
    Config,
    OsloMessagingNotificationsOptions,
    PlacementDatabaseOptions,
    PlacementOptions,
)
from asyncsched.conf.redact import mask_tree
from asyncsched.objects.models import CellMapping
from asyncsched.service import health_snapshot
from asyncsched.state.db import NovaDatabase
from asyncsched.state.table import Cell


def keys(words: str) -> dict[str, Any]:
    return dict.fromkeys(words.split())


DATABASE = keys(
    "stale age loaded consecutive_failures read_failures down_for retry_in last_error address"
)
EXPECTED: dict[str, Any] = {
    "admin": keys("listen serving token_required tls requests denied"),
    "looplag": keys(
        "last_s max_s gc_collections gc_pause_s gc_pause_max_s gc_pause_longest_s "
        "gc_pause_max_cpu_s gc_pause_max_collected"
    ),
    "hoststate": {
        **keys("ok ready stale"),
        # before 835b20d's cache started, "api" held only stale, age, loaded and last_error;
        # now the same keys as once it has started (zeros and nulls until then)
        "api": DATABASE,
        "cells": {},
        "unusable_cells": {},
        **keys(
            "hosts aggregates assumed assumed_unfit assumptions_confirmed assumptions_expired "
            "assumptions_released assumptions_refitted assumptions_unfit refresh_passes "
            "full_resyncs beat_sweeps pass_service_rows refresh_failures image_props_reads "
            "image_props_failures "
            "services_fresh_reads services_fresh_failures services_fresh_skipped"
        ),
    },
    "placement": {
        **keys(
            "endpoint started max_version calls errors claims claim_conflicts claims_failed "
            "deletes delete_failures fenced last_error last_error_age_s last_ok_age_s"
        ),
        "last_duration_ms": {},
        "claim_batches": keys("alone posts posted refused largest"),
        "overcommit_guard": keys(
            "confirmed raced backed_out kept_after_race foreign_over unchecked"
        ),
        "pending_rollbacks": keys("pending oldest_age_s done dropped journal last_error"),
    },
    "placement_mirror": keys(
        "database serving reason providers age_s interval_s max_age_s load_ms refreshes "
        "on_demand_refreshes refresh_failures refresh_ms_last refresh_ms_p50 refresh_ms_max "
        "last_changed_providers last_allocation_rows_moved pending_claims last_error "
        "guard_usage_queries providers_over_capacity over_capacity_found"
    ),
    "candidates": {
        **keys("source why_not_mirror"),
        "paths": {},
        "fallback_reasons": {},
        **keys("last_path last_local_ms get_calls get_shared refusal_waits refusal_timeouts"),
    },
    "notifications": keys("enabled pending sent failed dropped last_error"),
    "scheduler": {
        **keys("driver filters weighers host_subset_size hosts host_state_stale"),
        "recent_outcomes": {},
        **keys("last_request recent_failures"),
    },
    "rpc": {
        **keys(
            "connected accepting broker virtual_host queues prefetch in_flight active_calls "
            "reply_cache cast_cache reply_cache_bytes held_bytes replies_pending last_error"
        ),
        "stats": keys(
            "received redelivered over_held_bytes malformed duplicates handed_back flow_pauses "
            "errors ok no_valid_host nova_errors heartbeats replies replies_late replies_dropped "
            "publish_retries reconnects"
        ),
    },
}


def tree(value: Any) -> Any:
    """Keys and nesting in order; leaves are None."""
    if isinstance(value, dict):
        return {k: tree(v) for k, v in value.items()}
    return None


def ordered(value: Any) -> Any:
    """Dicts as (key, subtree) lists, so a comparison also sees the order."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    return value


def published(doc: dict[str, Any]) -> Any:
    """What the health file and /v1/status carry: masked, through JSON and back."""
    return json.loads(json.dumps(mask_tree(doc), default=str))


def test_the_daemon_health_document_keeps_its_keys_and_order() -> None:
    config = Config(
        api_database=ApiDatabaseOptions(connection="postgresql://root@127.0.0.1:5432/nova_api"),
        placement=PlacementOptions(auth_type="none", endpoint_override="http://127.0.0.1:1"),
        placement_database=PlacementDatabaseOptions(
            connection="postgresql://root@127.0.0.1:5432/placement"
        ),
        asyncsched=AsyncschedOptions(admin_listen="127.0.0.1:0"),
        oslo_messaging_notifications=OsloMessagingNotificationsOptions(driver=("messagingv2",)),
    )
    daemon = build_daemon(config)
    doc = published(health_snapshot("new", daemon.components).as_json())
    assert list(doc) == ["state", "components"]
    assert ordered(tree(doc["components"])) == ordered(EXPECTED)


def test_a_cell_keeps_its_keys_and_order() -> None:
    db = NovaDatabase(
        "cell c1",
        "postgresql://root@127.0.0.1:5432/x",
        pool_size=1,
        query_timeout=1.0,
        reconnect_max=0.5,
        clock=lambda: 0.0,
    )
    cell = Cell(mapping=CellMapping(uuid="u1", name="c1", id=1, disabled=False), db=db)
    doc = published(cell.health(5.0, True).as_json())
    assert ordered(tree(doc)) == ordered(
        {
            **DATABASE,
            **keys("name hosts last_full_age"),
            "image_props": keys("wanted loaded instances images last_error"),
            "services_fresh": {
                **keys("ok last_error"),
                "held": keys("disabled forced_down silent"),
            },
        }
    )
    # the Mapping view is that same document
    assert dict(cell.health(5.0, True)) == cell.health(5.0, True).as_json()
