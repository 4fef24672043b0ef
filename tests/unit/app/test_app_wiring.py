"""asyncsched.app: what ``serve`` runs, in which order, and what each adapter adds.

Construction opens nothing (no connection is made before start()), so these run without peers;
the end-to-end behaviour is in tests/integration/e2e/.
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from typing import Any

import pytest

from asyncsched.admin.looplag import LoopLagMonitor
from asyncsched.app import (
    PlacementComponent,
    RPCComponent,
    SchedulerComponent,
    build_components,
    build_daemon,
)
from asyncsched.conf.options import (
    ApiDatabaseOptions,
    Config,
    FilterSchedulerOptions,
    PlacementDatabaseOptions,
    PlacementOptions,
)
from asyncsched.exceptions import ConfigError, PlacementError
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.usage import RankedUsageSource
from asyncsched.scheduling.candidates.guard_usage import DatabaseUsage
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.service import Drainable, Reconfigurable, component_name
from asyncsched.state.cache import HostStateCache

API = ApiDatabaseOptions(connection="postgresql+psycopg2://root@127.0.0.1:5432/nova_api")


def config(**filter_scheduler: Any) -> Config:
    return Config(
        api_database=API,
        placement=PlacementOptions(auth_type="none", endpoint_override="http://127.0.0.1:1"),
        filter_scheduler=dataclasses.replace(FilterSchedulerOptions(), **filter_scheduler),
    )


def test_components_in_start_order_and_roles() -> None:
    daemon = build_daemon(config())
    comps = list(daemon.components)
    assert [component_name(c) for c in comps] == [
        "looplag",
        "hoststate",
        "placement",
        "scheduler",
        "rpc",
    ]
    assert isinstance(comps[0], LoopLagMonitor)
    assert comps[1] is daemon.cache
    assert isinstance(comps[2], PlacementComponent) and comps[2].client is daemon.placement
    assert isinstance(comps[3], SchedulerComponent) and comps[3].manager is daemon.manager
    assert isinstance(comps[4], RPCComponent) and comps[4].server is daemon.rpc
    # The scheduler decides over the cache and claims through the same Placement client (its
    # candidates come through the CandidateSource, which has no mirror here).
    assert daemon.manager.cache is daemon.cache and daemon.manager.placement is daemon.candidates
    assert daemon.candidates is not None and daemon.candidates.client is daemon.placement
    assert daemon.mirror is None
    # Only the consumers drain (stopped first, in reverse order); SIGHUP reaches the cache and
    # the scheduler.
    assert [component_name(c) for c in comps if isinstance(c, Drainable)] == ["rpc"]
    assert {component_name(c) for c in comps if isinstance(c, Reconfigurable)} == {
        "hoststate",
        "scheduler",
    }
    assert [component_name(c) for c in build_components(config())] == [
        "looplag",
        "hoststate",
        "placement",
        "scheduler",
        "rpc",
    ]


def test_missing_api_database_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"\[api_database\] connection"):
        build_daemon(Config())


def test_unknown_filter_is_a_config_error_at_construction() -> None:
    with pytest.raises(ConfigError, match="NoSuchFilter"):
        build_daemon(config(enabled_filters=("ComputeFilter", "NoSuchFilter")))


def test_scheduler_reconfigure_applies_and_a_bad_list_keeps_the_old() -> None:
    daemon = build_daemon(config())
    sched = daemon.components[3]
    assert isinstance(sched, SchedulerComponent)
    sched.reconfigure(config(enabled_filters=("AllHostsFilter",), host_subset_size=3))
    health = sched.health()
    assert health["filters"] == ["AllHostsFilter"] and health["host_subset_size"] == 3
    with pytest.raises(ConfigError):
        sched.reconfigure(config(enabled_filters=("NoSuchFilter",)))
    assert sched.health()["filters"] == ["AllHostsFilter"]


def test_the_driver_option_chooses_the_strategy() -> None:
    """``[asyncsched] driver`` picks the decision driver once, at construction (app.py)."""
    assert isinstance(build_daemon(config()).manager, SchedulerManager)
    cfg = config()
    cfg = dataclasses.replace(cfg, asyncsched=dataclasses.replace(cfg.asyncsched, driver="chance"))
    daemon = build_daemon(cfg)
    assert isinstance(daemon.manager, ChanceScheduler)
    health = SchedulerComponent(daemon.manager, daemon.cache).health()
    assert health["driver"] == "chance"
    assert health["filters"] == [] and health["weighers"] == []  # it runs none


def test_scheduler_health_reports_cache_staleness_before_any_load() -> None:
    daemon = build_daemon(config())
    health = SchedulerComponent(daemon.manager, daemon.cache).health()
    assert health["host_state_stale"] is True  # nothing loaded yet: stale, not "fine"
    assert health["driver"] == "filter_scheduler"
    assert health["recent_outcomes"] == {} and health["last_request"] is None
    assert isinstance(daemon.cache, HostStateCache)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_placement_start_retries_then_fails_with_a_clear_error() -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    client = PlacementClient(PlacementOptions(auth_type="none", endpoint_override=url))
    comp = PlacementComponent(client, start_budget=0.6, retry_max=0.1)
    with pytest.raises(PlacementError, match=r"not usable after 0\.6 s"):
        await comp.start()
    assert comp.health()["errors"] >= 2  # it did retry


async def test_placement_start_waits_for_a_placement_that_comes_up() -> None:
    """Placement starting next to us: the component keeps trying until it answers."""
    port = closed_port()
    client = PlacementClient(
        PlacementOptions(auth_type="none", endpoint_override=f"http://127.0.0.1:{port}")
    )
    comp = PlacementComponent(client, start_budget=10.0, retry_max=0.1)

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        body = b'{"versions": [{"id": "v1.0", "max_version": "1.39", "min_version": "1.0"}]}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()
        writer.close()

    starting = asyncio.ensure_future(comp.start())
    await asyncio.sleep(0.3)
    assert not starting.done()
    server = await asyncio.start_server(handle, "127.0.0.1", port)
    try:
        await asyncio.wait_for(starting, 10)
        assert comp.health()["max_version"] == "1.39"
    finally:
        await comp.close()
        server.close()
        await server.wait_closed()


async def test_scheduler_health_lists_recent_failures_with_their_reasons() -> None:
    from asyncsched.scheduling.diagnostics import RequestSummary

    daemon = build_daemon(config())
    scheduler = SchedulerComponent(daemon.manager, daemon.cache)
    daemon.manager.diagnostics.record(RequestSummary("req-ok", 5, {}, outcome="ok"))
    daemon.manager.diagnostics.record(
        RequestSummary("req-bad", 5, {"ComputeFilter": {"down": 5}}, outcome="NoValidHost: ")
    )
    failures = scheduler.health()["recent_failures"]
    assert failures == ["req-bad: 5 candidates: ComputeFilter -5 (down 5) -> NoValidHost: "]


def test_routed_network_prefilter_is_refused_not_silently_ignored() -> None:
    cfg = dataclasses.replace(
        config(),
        scheduler=dataclasses.replace(
            config().scheduler, query_placement_for_routed_network_aggregates=True
        ),
    )
    with pytest.raises(ConfigError, match="query_placement_for_routed_network_aggregates"):
        build_daemon(cfg)


def test_admin_endpoint_is_off_unless_configured_and_first_when_on() -> None:
    assert build_daemon(config()).admin is None
    cfg = dataclasses.replace(
        config(),
        asyncsched=dataclasses.replace(config().asyncsched, admin_listen="127.0.0.1:0"),
    )
    daemon = build_daemon(cfg)
    # First to start (answers /healthz during the initial load), so last to close.
    assert [component_name(c) for c in daemon.components] == [
        "admin",
        "looplag",
        "hoststate",
        "placement",
        "scheduler",
        "rpc",
    ]
    assert daemon.components[0] is daemon.admin


@pytest.mark.parametrize("mirror", [True, False])
def test_the_guard_reads_placements_database_with_ranks_where_the_mirror_is(mirror: bool) -> None:
    """With the mirror configured the overcommit guard confirms claims from Placement's
    database (the mirror's usage reader) and can rank racing claims by write order; with the
    mirror switched off it asks Placement's API (the client) as before."""
    base = config()
    cfg = dataclasses.replace(
        base,
        placement_database=PlacementDatabaseOptions(
            connection="postgresql://ro@127.0.0.1:5432/placement"
        ),
        asyncsched=dataclasses.replace(base.asyncsched, placement_mirror=mirror),
    )
    daemon = build_daemon(cfg)
    guard = daemon.placement.guard
    assert guard is not None
    if mirror:
        assert daemon.mirror is not None
        assert isinstance(guard.usages, DatabaseUsage) and isinstance(
            guard.usages, RankedUsageSource
        )
        assert guard.usages._reader is daemon.mirror.usage
        assert guard.usages._holdings is not None
    else:
        assert daemon.mirror is None and guard.usages is daemon.placement
