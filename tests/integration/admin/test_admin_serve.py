"""The admin endpoint of the real ``asyncsched serve`` process, against real peers.

Real traffic from the real oslo.messaging client, then ``/metrics`` parsed with
prometheus_client's parser: the counts must match what was sent. Then ``/readyz`` must flip
to 503 (with the reason) and back as each peer goes down and up: RabbitMQ (a private node of
this module, stopped with ``stop_app``, never the shared one), a cell database (its
connection runs through a TCP proxy this test cuts; PostgreSQL keeps running) and Placement
(this module's own gunicorn, killed and respawned).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from tests.support.admin_http import admin_get, wait_readyz
from tests.support.cloud import (
    AggregatePlan,
    Cloud,
    HostPlan,
    daemon_config,
    decode_reply,
    seeded_cloud,
)
from tests.support.daemon import serving, write_config
from tests.support.net import free_port
from tests.support.nova_db import NovaDB, url_for
from tests.support.oslo_caller import (
    OsloSchedulerClient,
    fake_nova_exception,
    request_spec_primitive,
)
from tests.support.placement_server import PlacementServer
from tests.support.private_broker import PrivateBroker, private_broker
from tests.support.serve_process import ServeProcess
from tests.support.tcp_proxy import TcpProxy, tcp_proxy

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "t0ken-for-the-admin-endpoint"
MAX_AGE = 2.0  # [asyncsched] ready_max_state_age: a cut cell shows within ~2.5 s
FLIP = 30.0  # seconds a probe may take to flip


@dataclass
class Stack:
    daemon: ServeProcess
    admin: str
    broker: PrivateBroker
    proxy: TcpProxy
    placement: PlacementServer
    db: NovaDB
    cloud: Cloud


@pytest.fixture(scope="module")
def broker() -> Iterator[PrivateBroker]:
    with private_broker() as node:
        yield node


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    broker: PrivateBroker,
    placement_server: PlacementServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("admin")
    hosts = [
        HostPlan(f"a{c}-{i}", c, 8, 16384, 500, aggregates=("az",))
        for c in (0, 1)
        for i in range(3)
    ]
    # Only this one fits a 64 GiB flavor, and it is disabled: ComputeFilter empties the list.
    hosts.append(HostPlan("giant", 0, 64, 262144, 4000, aggregates=("az",), disabled=True))
    az = [AggregatePlan("az", "az1")]
    async with seeded_cloud("asyncsched_admin", placement_server, hosts, az, n_cells=2) as (
        db,
        cloud,
    ):
        with tcp_proxy("127.0.0.1", 5432) as proxy:
            cell2 = db.cells[1]
            await db.api_execute(
                "UPDATE cell_mappings SET database_connection = $1 WHERE id = $2",
                url_for(cell2.dbname, port=proxy.port),
                cell2.id,
            )
            port = free_port()
            config = daemon_config(
                transport_url=broker.url(),
                api_url=db.api_url,
                placement=replace(placement_server.options, timeout=5.0),
                scheduler_host=f"admin-{uuid.uuid4().hex[:8]}",
                refresh_interval=0.3,
                full_resync_interval=3600.0,
                drain_timeout=5.0,
                admin_listen=f"127.0.0.1:{port}",
                ready_max_state_age=MAX_AGE,
                ready_placement_timeout=2.0,
                db_reconnect_max=1.0,
                db_query_timeout=2.0,
            )
            async with serving(write_config(tmp, config, admin_token=TOKEN)) as daemon:
                admin = f"http://127.0.0.1:{port}"
                yield Stack(daemon, admin, broker, proxy, placement_server, db, cloud)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(broker: PrivateBroker) -> AsyncIterator[OsloSchedulerClient]:
    c = OsloSchedulerClient(broker.url(), timeout=60.0, call_monitor_timeout=30.0)
    try:
        yield c
    finally:
        c.close()


async def get(stack: Stack, path: str, token: str | None = TOKEN) -> tuple[int, str]:
    return await admin_get(stack.admin, path, token)


async def scrape(stack: Stack) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, text = await get(stack, "/metrics")
    assert status == 200, text
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def at(got: dict[Any, float], name: str, **labels: str) -> float:
    return got.get((name, tuple(sorted(labels.items()))), 0.0)


async def wait_ready(stack: Stack, want: int, contains: str = "") -> str:
    return await wait_readyz(stack.admin, TOKEN, want, contains, FLIP)


REFRESH = "asyncsched_host_state_refresh_duration_seconds_count"


async def wait_incremental(
    stack: Stack, cells: tuple[str, ...]
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Scrape until every cell has had an incremental pass (refresh_interval is 0.3 s)."""
    deadline = time.monotonic() + FLIP
    while True:
        got = await scrape(stack)
        if all(at(got, REFRESH, cell=c, kind="incremental") > 0 for c in cells):
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"no incremental pass in {FLIP} s for one of {cells}")
        await asyncio.sleep(0.1)


def spec(memory_mb: int, n: int = 1) -> dict[str, Any]:
    return request_spec_primitive(
        num_instances=n,
        memory_mb=memory_mb,
        vcpus=1,
        root_gb=10,
        group_policy=None,
        availability_zone="az1",
    )


async def test_probes_and_the_token(stack: Stack) -> None:
    assert await get(stack, "/healthz", token=None) == (200, "ok\n")
    for path in ("/metrics", "/readyz", "/v1/status"):
        assert (await get(stack, path, token=None))[0] == 401
    await wait_ready(stack, 200)
    status, body = await get(stack, "/v1/status")
    assert status == 200
    doc = json.loads(body)
    assert doc["ready"] is True and doc["state"] == "running"
    assert {"admin", "looplag", "hoststate", "placement", "scheduler", "rpc"} <= set(
        doc["components"]
    )


async def test_counts_after_real_traffic(stack: Stack, client: OsloSchedulerClient) -> None:
    await wait_ready(stack, 200)
    before = await scrape(stack)
    uuids = [str(uuid.uuid4()) for _ in range(3)]
    sels = decode_reply(await asyncio.to_thread(client.select_destinations, spec(1024, 3), uuids))
    assert len(sels) == 3
    with fake_nova_exception() as nova_exc:
        with pytest.raises(nova_exc.NoValidHost):  # only the disabled giant fits 64 GiB
            await asyncio.to_thread(client.select_destinations, spec(65536), [str(uuid.uuid4())])
        with pytest.raises(nova_exc.NoValidHost):  # nothing fits 2 TiB: Placement says none
            await asyncio.to_thread(
                client.select_destinations, spec(2 * 1024 * 1024), [str(uuid.uuid4())]
            )
    assert (await asyncio.to_thread(client.ping, "x"))["service"] == "scheduler"
    after = await scrape(stack)

    def delta(name: str, **labels: str) -> float:
        return at(after, name, **labels) - at(before, name, **labels)

    latency = "asyncsched_select_destinations_duration_seconds_count"
    assert delta(latency, outcome="ok") == 1
    assert delta(latency, outcome="no_valid_host") == 2
    assert delta(latency, outcome="error") == 0
    assert delta("asyncsched_rpc_calls_total", method="ping", outcome="ok") == 1
    assert delta("asyncsched_instances_scheduled_total") == 3
    assert delta("asyncsched_no_valid_host_total", filter="ComputeFilter") == 1
    assert delta("asyncsched_no_valid_host_total", filter="placement_no_candidates") == 1
    assert delta("asyncsched_placement_claims_total") == 3
    claims = "asyncsched_placement_request_duration_seconds_count"
    # Three claims in one to three writes: alone (PUT) or sharing a POST /allocations.
    writes = delta(claims, call="claim", status="2xx")
    assert 1 <= writes + delta(claims, call="claim_batch", status="2xx") <= 3
    assert delta(claims, call="allocation_candidates", status="2xx") == 3
    phases = "asyncsched_select_destinations_phase_seconds_count"
    assert delta(phases, phase="candidates") == 2  # the third request failed in that phase
    assert delta(phases, phase="claim") == 1 and delta(phases, phase="decide") == 1
    assert delta(phases, phase="reply") == 3
    assert delta("asyncsched_rpc_messages_received_total") == 4
    assert delta("asyncsched_rpc_replies_total") == 4
    assert at(after, "asyncsched_rpc_in_flight") == 0
    assert at(after, "asyncsched_rpc_connected") == 1
    assert at(after, "asyncsched_host_state_hosts") == 7
    for cell in ("api", "cell1", "cell2"):
        assert at(after, "asyncsched_host_state_age_seconds", cell=cell) < MAX_AGE
    for cell in ("api", "cell1", "cell2"):
        assert at(after, REFRESH, cell=cell, kind="full") == 1  # the initial load
    # The traffic above can finish inside one refresh interval; the passes come after it.
    got = await wait_incremental(stack, ("api", "cell1", "cell2"))
    for cell in ("api", "cell1", "cell2"):
        assert at(got, REFRESH, cell=cell, kind="full") == 1  # still only the initial load
    assert at(after, "asyncsched_up") == 1
    assert at(after, "asyncsched_gc_frozen_objects") > 0  # the daemon froze its start-up heap
    assert ("asyncsched_gc_heap_freezes_total", ()) in after  # exported (7 hosts: none yet)
    # the loop-lag monitor samples every 0.25 s from start-up; a quick start and quick calls
    # can be scraped before its first sample
    deadline = time.monotonic() + 5
    while at(got, "asyncsched_event_loop_lag_seconds_count") == 0:
        assert time.monotonic() < deadline, "no event-loop lag sample in 5 s"
        await asyncio.sleep(0.1)
        got = await scrape(stack)


async def test_readyz_follows_rabbitmq(stack: Stack) -> None:
    await wait_ready(stack, 200)
    await asyncio.to_thread(stack.broker.stop_app)
    try:
        await wait_ready(stack, 503, "rpc: not connected to RabbitMQ")
        assert (await get(stack, "/healthz", token=None))[0] == 200  # alive all the same
    finally:
        await asyncio.to_thread(stack.broker.start_app)
    await wait_ready(stack, 200)
    got = await scrape(stack)
    assert at(got, "asyncsched_rpc_reconnects_total") >= 1


async def test_readyz_follows_a_cell_database(stack: Stack) -> None:
    await wait_ready(stack, 200)
    stack.proxy.cut()
    try:
        body = await wait_ready(stack, 503, "hoststate: cell cell2 last read")
        assert "cell1" not in body  # the other cell is fine
        got = await scrape(stack)
        assert at(got, "asyncsched_host_state_stale", cell="cell2") == 1
        assert at(got, "asyncsched_host_state_consecutive_failures", cell="cell2") >= 1
        assert at(got, "asyncsched_host_state_age_seconds", cell="cell2") > MAX_AGE
        assert at(got, "asyncsched_host_state_refresh_failures_total", cell="cell2") >= 1
        assert at(got, "asyncsched_host_state_refresh_failures_total", cell="cell1") == 0
    finally:
        stack.proxy.restore()
    await wait_ready(stack, 200)
    got = await scrape(stack)
    assert at(got, "asyncsched_host_state_stale", cell="cell2") == 0


async def test_readyz_follows_placement(stack: Stack) -> None:
    await wait_ready(stack, 200)
    await asyncio.to_thread(stack.placement.kill)
    try:
        await wait_ready(stack, 503, "placement: unreachable")
    finally:
        await asyncio.to_thread(stack.placement.respawn)
    await wait_ready(stack, 200)
    got = await scrape(stack)
    probes = "asyncsched_placement_request_duration_seconds_count"
    assert at(got, probes, call="ping", status="error") >= 1
    assert stack.daemon.proc is not None and stack.daemon.proc.poll() is None
