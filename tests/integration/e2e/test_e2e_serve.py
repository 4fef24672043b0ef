"""End to end against the real ``python -m asyncsched serve --config-file F`` process.

The daemon runs as systemd would run it (a real notify socket); nova-conductor's real
oslo.messaging client calls it over RabbitMQ; host state comes from nova databases in
PostgreSQL and claims go to the real Placement. Placement is reached through a loopback relay
that can hold each response back, so a batch can be kept in flight while the test sends
SIGTERM: the daemon must stop consuming, finish that batch, answer it and exit 0.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from asyncsched.conf.options import FilterSchedulerOptions, PlacementOptions
from tests.support.cloud import (
    AZ1,
    SMALL,
    SeededStack,
    config_file_text,
    daemon_config,
    decode_reply,
)
from tests.support.e2e_checks import check_allocations, check_selections
from tests.support.oslo_caller import (
    OsloSchedulerClient,
    fake_nova_exception,
    request_spec_primitive,
)
from tests.support.placement_relay import Relay
from tests.support.serve_process import ServeProcess

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def relay(seeded: SeededStack) -> AsyncIterator[Relay]:
    r = Relay(seeded.placement.port)
    await r.start()
    try:
        yield r
    finally:
        await r.close()


STARTUP: list[float] = []  # seconds from spawn to READY=1, measured by the serve fixture


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def serve(
    seeded: SeededStack,
    relay: Relay,
    module_amqp_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[ServeProcess]:
    tmp = tmp_path_factory.mktemp("serve")
    config = daemon_config(
        transport_url=module_amqp_url,
        api_url=seeded.db.api_url,
        placement=replace(
            PlacementOptions(),
            auth_type="none",
            endpoint_override=f"http://127.0.0.1:{relay.port}",
            timeout=30.0,
        ),
        scheduler_host=f"e2e-serve-{uuid.uuid4().hex[:8]}",
        enabled_filters=(*FilterSchedulerOptions().enabled_filters, "SameHostFilter"),
        refresh_interval=3600.0,
        full_resync_interval=3600.0,
        drain_timeout=60.0,
        health_file=str(tmp / "health.json"),
    )
    conf = tmp / "asyncsched.conf"
    conf.write_text(config_file_text(config))
    daemon = ServeProcess(conf, tmp / "stderr.log")
    started = time.monotonic()
    daemon.start()
    try:
        ready = await asyncio.to_thread(daemon.listener.wait_for, "READY", "1", 60.0)
        assert daemon.proc is not None and ready["MAINPID"] == str(daemon.proc.pid)
        STARTUP.append(time.monotonic() - started)
        yield daemon
    except BaseException:
        print(daemon.stderr())
        raise
    finally:
        daemon.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(module_amqp_url: str) -> AsyncIterator[OsloSchedulerClient]:
    c = OsloSchedulerClient(module_amqp_url, timeout=120.0, call_monitor_timeout=30.0)
    try:
        yield c
    finally:
        c.close()


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def spec(n: int, **kw: Any) -> dict[str, Any]:
    return request_spec_primitive(
        num_instances=n,
        memory_mb=2048,
        vcpus=1,
        root_gb=20,
        group_policy=None,
        availability_zone="az1",
        **kw,
    )


async def test_serve_health_file_reports_components_and_cache(serve: ServeProcess) -> None:
    path = serve.conf.parent / "health.json"
    health = None
    for _ in range(100):  # written right after READY
        health = await asyncio.to_thread(read_json, path)
        if health is not None:
            break
        await asyncio.sleep(0.05)
    assert health is not None
    comps = health["components"]
    assert health["state"] == "running"
    assert set(comps) == {"looplag", "hoststate", "placement", "scheduler", "rpc"}
    # The loop's longest hold since start, against the start-up this run measured (process
    # start, imports, host-state load, Placement, RabbitMQ): a hold as long would be a stall.
    assert comps["looplag"]["max_s"] < STARTUP[0] / 2, (comps["looplag"], STARTUP)
    assert comps["hoststate"]["stale"] is False and comps["hoststate"]["hosts"] == 36
    assert comps["scheduler"]["host_state_stale"] is False
    assert comps["placement"]["max_version"]
    assert comps["rpc"]["connected"] is True


@pytest.mark.parametrize("count", [1, 10])
async def test_serve_boots(
    serve: ServeProcess, seeded: SeededStack, client: OsloSchedulerClient, count: int
) -> None:
    uuids = [str(uuid.uuid4()) for _ in range(count)]
    reply = await asyncio.to_thread(client.select_destinations, spec(count), uuids)
    sels = decode_reply(reply)
    check_selections(seeded.cloud, sels, uuids, AZ1, az="az1")
    await check_allocations(seeded.placement, sels, uuids, SMALL)


async def test_sighup_reloads_the_filters_of_the_running_daemon(
    serve: ServeProcess, seeded: SeededStack, client: OsloSchedulerClient
) -> None:
    """systemctl reload: the config file loses SameHostFilter, SIGHUP, and a request that
    filter refused is scheduled by the same process."""
    assert serve.proc is not None
    same_host = spec(1, hints={"same_host": [str(uuid.uuid4())]})  # an instance nowhere
    with fake_nova_exception() as nova_exc:
        with pytest.raises(nova_exc.NoValidHost):
            await asyncio.to_thread(client.select_destinations, same_host, [str(uuid.uuid4())])
    text = serve.conf.read_text()
    assert ",SameHostFilter" in text
    serve.conf.write_text(text.replace(",SameHostFilter", ""))
    serve.proc.send_signal(signal.SIGHUP)
    await asyncio.to_thread(serve.listener.wait_for, "RELOADING", "1", 30.0)
    await asyncio.to_thread(serve.listener.wait_for, "READY", "1", 30.0)
    uuids = [str(uuid.uuid4())]
    sels = decode_reply(await asyncio.to_thread(client.select_destinations, same_host, uuids))
    check_selections(seeded.cloud, sels, uuids, AZ1, az="az1")
    await check_allocations(seeded.placement, sels, uuids, SMALL)
    assert serve.proc.poll() is None
    assert "configuration reloaded: [filter_scheduler] enabled_filters" in serve.stderr()


async def test_sigterm_while_a_100_instance_batch_is_in_flight_still_answers_it(
    serve: ServeProcess, seeded: SeededStack, relay: Relay, client: OsloSchedulerClient
) -> None:
    assert serve.proc is not None
    uuids = [str(uuid.uuid4()) for _ in range(100)]
    relay.candidates_seen.clear()
    relay.delay = 0.1  # every Placement answer held back: the batch takes seconds
    try:
        call = asyncio.ensure_future(
            asyncio.to_thread(client.select_destinations, spec(100), uuids)
        )
        await asyncio.wait_for(relay.candidates_seen.wait(), 60)
        assert not call.done()
        serve.proc.send_signal(signal.SIGTERM)
        await asyncio.to_thread(serve.listener.wait_for, "STOPPING", "1", 30.0)
        reply = await call
    finally:
        relay.delay = 0.0
    sels = decode_reply(reply)
    check_selections(seeded.cloud, sels, uuids, AZ1, az="az1")
    await check_allocations(seeded.placement, sels, uuids, SMALL)
    code = await asyncio.to_thread(serve.proc.wait, 60)
    err = serve.stderr()
    assert code == 0, err
    assert "Draining 1 in-flight RPC requests" in err
    assert "Traceback" not in err
    health = await asyncio.to_thread(read_json, serve.conf.parent / "health.json")
    assert health is not None and health["state"] == "stopped"
