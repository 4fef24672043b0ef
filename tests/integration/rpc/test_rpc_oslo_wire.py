"""asyncsched's RPC server against the real RabbitMQ, called by the real oslo.messaging client.

Every call goes through ``tests.support.oslo_caller.OsloSchedulerClient``, which builds its
RPCClient exactly as nova's scheduler rpcapi does (Target topic scheduler 4.0, cap 4.5,
call_monitor_timeout set). The decision function is a small recorder; the wire is the subject.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import aio_pika
import oslo_messaging as messaging
import pytest
from oslo_config import cfg

from asyncsched.objects import codec
from asyncsched.objects.models import Aggregate
from asyncsched.rpc.server import RPCServer
from tests.support.broker import close_connections, list_json, make_config, rabbitmqctl
from tests.support.decisions import RecordingEvents, RecordingScheduler
from tests.support.oslo_caller import (
    OsloSchedulerClient,
    fake_nova_exception,
    nova_context,
    raw_ping,
    request_spec,
    request_spec_primitive,
)

pytestmark = pytest.mark.integration

T = TypeVar("T")
ROOT = Path(__file__).resolve().parents[3]


def iu(tag: str) -> str:
    """A stable instance uuid per tag (select_destinations refuses anything but UUIDs)."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, tag))


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(max_workers=16, thread_name_prefix="oslo-caller")
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


async def in_thread(pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """oslo.messaging blocks; run it off the event loop that serves the calls."""
    return await asyncio.get_running_loop().run_in_executor(pool, lambda: fn(*args, **kw))


@pytest.fixture
def client(amqp_url: str) -> Iterator[OsloSchedulerClient]:
    c = OsloSchedulerClient(amqp_url, timeout=30, call_monitor_timeout=10)
    yield c
    c.close()


async def test_select_destinations_round_trip(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    scheduler, events = RecordingScheduler(), RecordingEvents()
    spec = request_spec(num_instances=3)
    uuids = [str(uuid.uuid4()) for _ in range(3)]
    ctx = nova_context()
    async with RPCServer(make_config(amqp_url), scheduler, events):
        result = await in_thread(
            pool,
            client.select_destinations,
            request_spec_primitive(spec),
            uuids,
            context=ctx,
        )
    assert len(result) == 3
    for i, per_instance in enumerate(result):
        chosen, alternate = (codec.decode_selection(p) for p in per_instance)
        assert chosen.service_host == f"cn-{i}" and alternate.service_host == f"alt-{i}"
        assert per_instance[0]["nova_object.version"] == "1.1"
        assert json.loads(chosen.allocation_request or "")["allocations"]
    # The RequestSpec survived oslo's client serialisation and our decoding unchanged.
    assert scheduler.specs == [spec]
    assert scheduler.contexts[0].request_id == ctx["request_id"]
    assert scheduler.contexts[0].auth_token == ctx["auth_token"]
    assert dict(scheduler.per_instance) == {u: 1 for u in uuids}


async def test_legacy_4_0_call_without_objects(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    scheduler = RecordingScheduler()
    async with RPCServer(make_config(amqp_url), scheduler, RecordingEvents()):
        result = await in_thread(
            pool,
            client.select_destinations_legacy,
            {
                "instance_type": {"memory_mb": 1024, "vcpus": 1, "root_gb": 10},
                "instance_properties": {"project_id": "p1"},
                "num_instances": 2,
                "image": {"properties": {"architecture": "x86_64"}},
            },
            {"scheduler_hints": {"foo": "bar"}},
        )
    assert result == [
        {"host": "cn-0", "nodename": "cn-0.sched", "limits": {}},
        {"host": "cn-1", "nodename": "cn-1.sched", "limits": {}},
    ]
    assert scheduler.specs[0].image is not None
    assert scheduler.specs[0].image.properties.hw_architecture == "x86_64"


async def test_no_valid_host_as_remote_error_and_as_nova_exception(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    too_big = request_spec_primitive(vcpus=128)
    async with RPCServer(make_config(amqp_url), RecordingScheduler(), RecordingEvents()):
        # nova.exception not importable: a RemoteError naming the class.
        with pytest.raises(messaging.RemoteError) as remote:
            await in_thread(pool, client.select_destinations, too_big, [iu("u1")])
        assert remote.value.exc_type == "NoValidHost"
        assert "No valid host was found. no host has 128 VCPU" in str(remote.value.value)
        # With nova.exception importable (as in a conductor) it is re-raised as NoValidHost.
        with fake_nova_exception() as nova_exc:
            with pytest.raises(nova_exc.NoValidHost) as raised:
                await in_thread(pool, client.select_destinations, too_big, [iu("u1")])
    err = raised.value
    assert err.kwargs == {"reason": "no host has 128 VCPU", "code": 500}
    assert err.format_message() == "No valid host was found. no host has 128 VCPU"


async def test_slow_call_survives_on_heartbeats(
    amqp_url: str, pool: ThreadPoolExecutor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """call_monitor_timeout=2 s, the decision takes 3.5 s: only heartbeats keep it alive."""
    client = OsloSchedulerClient(amqp_url, timeout=30, call_monitor_timeout=2)
    try:
        server = RPCServer(make_config(amqp_url), RecordingScheduler(delay=3.5), RecordingEvents())
        async with server:
            result = await in_thread(
                pool, client.select_destinations, request_spec_primitive(), [iu("u1")]
            )
            assert len(result) == 1
            assert server.stats.heartbeats >= 2

            # Control: the same call without heartbeats is abandoned by the caller.
            async def no_heartbeats(*_: Any) -> None:
                await asyncio.Event().wait()

            monkeypatch.setattr(server, "_heartbeats", no_heartbeats)
            with pytest.raises(messaging.MessagingTimeout):
                await in_thread(
                    pool, client.select_destinations, request_spec_primitive(), [iu("u2")]
                )
    finally:
        client.close()


async def test_unsupported_version_no_such_method_and_ping(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    spec = request_spec_primitive()
    async with RPCServer(make_config(amqp_url), RecordingScheduler(), RecordingEvents()):
        for version in ("4.6", "5.0"):
            with pytest.raises(messaging.RemoteError) as info:
                await in_thread(
                    pool,
                    client.call,
                    "select_destinations",
                    version=version,
                    capped=False,
                    spec_obj=spec,
                    instance_uuids=[iu("u")],
                )
            assert info.value.exc_type == "UnsupportedVersion"
            assert f"does not support RPC version {version}" in str(info.value.value)
        with pytest.raises(messaging.RemoteError) as info:
            await in_thread(pool, client.call, "frobnicate", version="4.5")
        assert info.value.exc_type == "NoSuchMethod"
        assert await in_thread(pool, client.ping, {"x": [1, 2]}) == {
            "service": "scheduler",
            "arg": {"x": [1, 2]},
        }
        # A malformed spec is a clear failure, and the next call is served.
        with pytest.raises(ValueError, match="Malformed request"):
            await in_thread(
                pool, client.select_destinations, {"nova_object.name": "Bogus"}, [iu("u")]
            )
        assert len(await in_thread(pool, client.select_destinations, spec, [iu("u")])) == 1


async def test_garbage_on_the_queue_is_dropped_and_the_next_call_served(
    amqp_url: str, vhost: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    server = RPCServer(make_config(amqp_url), RecordingScheduler(), RecordingEvents())
    async with server:
        conn = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:5672/{vhost}")
        async with conn:
            channel = await conn.channel()
            exchange = await channel.get_exchange("nova")
            for body in (b"\x00garbage", b"[]", b'{"oslo.version": "9.9", "oslo.message": "{}"}'):
                await exchange.publish(aio_pika.Message(body), routing_key="scheduler")
        assert (
            len(
                await in_thread(
                    pool, client.select_destinations, request_spec_primitive(), [iu("g")]
                )
            )
            == 1
        )
        assert server.stats.malformed == 3
        queues = await asyncio.to_thread(list_json, "list_queues", vhost, "name", "messages")
    assert {q["name"]: q["messages"] for q in queues}["scheduler"] == 0  # rejected, not requeued


async def test_reply_to_a_not_yet_existing_reply_queue_is_retried(
    amqp_url: str, vhost: str
) -> None:
    """basic.return (no such reply queue) is retried as oslo does, then given up on."""
    server = RPCServer(
        make_config(amqp_url, kombu_missing_consumer_retry_timeout=3),
        RecordingScheduler(),
        RecordingEvents(),
    )
    reply_q = f"reply_{uuid.uuid4().hex}"

    def call_body(msg_id: str) -> bytes:
        return raw_ping(reply_q, msg_id)

    async with server:
        conn = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:5672/{vhost}")
        async with conn:
            channel = await conn.channel()
            exchange = await channel.get_exchange("nova")
            await exchange.publish(aio_pika.Message(call_body("late")), routing_key="scheduler")
            await asyncio.sleep(1.0)  # the reply is being returned by the broker meanwhile
            queue = await channel.declare_queue(reply_q, arguments={"x-expires": 60000})
            message = await queue.get(timeout=10, fail=False)
            for _ in range(50):
                if message is not None:
                    break
                await asyncio.sleep(0.1)
                message = await queue.get(fail=False)
            assert message is not None
            reply = json.loads(json.loads(message.body)["oslo.message"])
            assert reply["result"] == {"service": "scheduler", "arg": "late"}
            assert message.content_type == "application/json"
            # A reply queue that never appears: given up after the retry window, acked anyway.
            await queue.delete(if_unused=False, if_empty=False)
            await exchange.publish(aio_pika.Message(call_body("never")), routing_key="scheduler")
            async with asyncio.timeout(10):
                while server.stats.replies_dropped < 1:  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
        for _ in range(20):  # the request is acked right after the reply is given up
            queues = await asyncio.to_thread(list_json, "list_queues", vhost, "name", "messages")
            if {q["name"]: q["messages"] for q in queues}["scheduler"] == 0:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"request left in the queue: {queues}")


def _start_worker(url: str, host: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.rpc.fanout_worker", url, host],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        raise AssertionError(f"worker did not start: {line!r}")
    return proc


def _stop_worker(proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
    out, _ = proc.communicate(input="", timeout=30)
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


async def test_fanout_casts_reach_two_processes_and_calls_are_shared(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    events = RecordingEvents()
    scheduler = RecordingScheduler(delay=0.01)
    proc = await asyncio.to_thread(_start_worker, amqp_url, "sched-other")
    try:
        async with RPCServer(make_config(amqp_url, host="sched-here"), scheduler, events):
            agg = Aggregate(id=3, uuid=str(uuid.uuid4()), name="agg3", hosts=("cn-1",))
            await in_thread(pool, client.update_aggregates, [agg])
            await in_thread(pool, client.delete_aggregate, agg)
            await in_thread(pool, client.update_instance_info, "cn-1", ["i-1", "i-2"])
            await in_thread(pool, client.delete_instance_info, "cn-1", "i-1")
            await in_thread(pool, client.sync_instance_info, "cn-1", ["i-2"])
            await events.wait_for(5)
            # Competing consumers on the shared "scheduler" queue.
            calls = [
                in_thread(pool, client.select_destinations, request_spec_primitive(), [iu(f"c{i}")])
                for i in range(12)
            ]
            assert all(len(r) == 1 for r in await asyncio.gather(*calls))
    finally:
        lines = await asyncio.to_thread(_stop_worker, proc)
    assert events.seen == [
        ("update_aggregates", (agg,)),
        ("delete_aggregate", agg),
        ("update_instance_info", ("cn-1", ("i-1", "i-2"))),
        ("delete_instance_info", ("cn-1", "i-1")),
        ("sync_instance_info", ("cn-1", ("i-2",))),
    ]
    other = [(d["event"], d["value"]) for d in lines if d["event"] != "select_destinations"]
    assert other == [
        ("update_aggregates", [[3, "agg3", ["cn-1"]]]),
        ("delete_aggregate", 3),
        ("update_instance_info", ["cn-1", ["i-1", "i-2"]]),
        ("delete_instance_info", ["cn-1", "i-1"]),
        ("sync_instance_info", ["cn-1", ["i-2"]]),
    ]
    served_there = {d["value"][0] for d in lines if d["event"] == "select_destinations"}
    served_here = set(scheduler.per_instance)
    assert served_here | served_there == {iu(f"c{i}") for i in range(12)}
    assert not served_here & served_there
    assert served_here and served_there  # RabbitMQ spread the calls over both processes


async def test_connection_drop_mid_stream_loses_nothing(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    # Every call is held until the connection is gone (calls answered before the drop are not
    # redelivered): close_connections' three rabbitmqctl runs took ~3 s at load 2 and over 8 s
    # at load 25, so a fixed delay was a race with the machine's load.
    dropped = asyncio.Event()
    scheduler = RecordingScheduler(gate=dropped)
    server = RPCServer(make_config(amqp_url), scheduler, RecordingEvents())
    uuids = [str(uuid.uuid4()) for _ in range(12)]
    async with server:
        calls = [
            asyncio.ensure_future(
                in_thread(pool, client.select_destinations, request_spec_primitive(), [u])
            )
            for u in uuids
        ]
        async with asyncio.timeout(60):
            while sum(scheduler.per_instance.values()) < len(uuids):  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        # Every call is in flight (unacked): kill our connection from the broker side.
        closed = await asyncio.to_thread(close_connections, server.connection_name)
        assert closed == 1
        async with asyncio.timeout(60):  # answered once the server is back on the broker
            while not server.stats.reconnects:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        dropped.set()
        results = await asyncio.gather(*calls)
        assert server.stats.reconnects >= 1
        assert server.stats.duplicates >= 1, server.stats  # RabbitMQ redelivered
    assert [r[0][0]["nova_object.data"]["service_host"] for r in results] == ["cn-0"] * 12
    # Each request was scheduled exactly once although it was delivered twice.
    assert dict(scheduler.per_instance) == {u: 1 for u in uuids}


async def test_a_flood_beyond_max_held_requests_waits_in_rabbitmq(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor
) -> None:
    scheduler = RecordingScheduler(delay=0.3)
    config = make_config(amqp_url, max_concurrent=3, max_held=6)
    server = RPCServer(config, scheduler, RecordingEvents())
    async with server:
        calls = [
            asyncio.ensure_future(
                in_thread(pool, client.select_destinations, request_spec_primitive(), [iu(f"f{i}")])
            )
            for i in range(15)
        ]
        peak = 0

        async def sample() -> None:
            nonlocal peak
            while True:
                peak = max(peak, server.health()["in_flight"])
                await asyncio.sleep(0.01)

        sampler = asyncio.ensure_future(sample())
        results = await asyncio.gather(*calls)
        sampler.cancel()
    # prefetch 6 on the scheduler queue: never more than 6 requests held by the process (3 of
    # them running); the rest of the flood waited in RabbitMQ.
    assert 3 < peak <= 6
    assert len(results) == 15 and scheduler.max_running == 3
    assert dict(scheduler.per_instance) == {iu(f"f{i}"): 1 for i in range(15)}


async def test_deleted_queues_are_redeclared(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor, vhost: str
) -> None:
    events = RecordingEvents()
    server = RPCServer(make_config(amqp_url), RecordingScheduler(), events)
    async with server:
        fanout = server.topology.queues[2].name
        for name in ("scheduler", fanout):
            await asyncio.to_thread(rabbitmqctl, "delete_queue", "-p", vhost, name)
        async with asyncio.timeout(10):
            while server.stats.reconnects < 1 or not server.health()["connected"]:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
        await in_thread(pool, client.sync_instance_info, "cn-1", ["i-1"])
        await events.wait_for(1)
        assert (
            len(
                await in_thread(
                    pool, client.select_destinations, request_spec_primitive(), [iu("x")]
                )
            )
            == 1
        )
    assert events.seen == [("sync_instance_info", ("cn-1", ("i-1",)))]


async def test_stream_fanout(amqp_url: str, pool: ThreadPoolExecutor, vhost: str) -> None:
    """rabbit_stream_fanout: one shared stream queue; every scheduler reads every cast."""
    rabbit = {
        "rabbit_stream_fanout": True,
        "rabbit_transient_quorum_queue": True,
        "rabbit_qos_prefetch_count": 10,
    }
    client = OsloSchedulerClient(amqp_url, rabbit_options=rabbit)
    try:
        first, second = RecordingEvents(), RecordingEvents()
        one = RPCServer(make_config(amqp_url, host="s1", **rabbit), RecordingScheduler(), first)
        two = RPCServer(make_config(amqp_url, host="s2", **rabbit), RecordingScheduler(), second)
        async with one, two:
            await asyncio.sleep(0.5)  # "last" offset: let both consumers attach before the cast
            await in_thread(pool, client.sync_instance_info, "cn-1", ["i-1"])
            await first.wait_for(1)
            await second.wait_for(1)
            # After a reconnect the stream resumes after the last offset handled (and the
            # _unique_id cache would drop a replay): each cast reaches each scheduler once.
            assert await asyncio.to_thread(close_connections, one.connection_name) == 1
            async with asyncio.timeout(10):
                while one.stats.reconnects < 1 or not one.health()["connected"]:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            await in_thread(pool, client.delete_instance_info, "cn-1", "i-1")
            await first.wait_for(2)
            await second.wait_for(2)
    finally:
        client.close()
    queues = {q["name"]: q for q in list_json("list_queues", vhost, "name", "arguments")}
    assert "scheduler_fanout" in queues
    expected = [
        ("sync_instance_info", ("cn-1", ("i-1",))),
        ("delete_instance_info", ("cn-1", "i-1")),
    ]
    assert first.seen == expected and second.seen == expected


async def test_failover_to_the_next_broker(vhost: str, pool: ThreadPoolExecutor) -> None:
    url = f"rabbit://guest:guest@127.0.0.1:1,guest:guest@127.0.0.1:5672/{vhost}"
    server = RPCServer(make_config(url), RecordingScheduler(), RecordingEvents())
    await server.start(timeout=20)
    try:
        health = server.health()
        assert health["connected"] and health["broker"] == "guest:***@127.0.0.1:5672"
        client = OsloSchedulerClient(f"rabbit://guest:guest@127.0.0.1:5672/{vhost}")
        try:
            assert await in_thread(pool, client.ping, 1) == {"service": "scheduler", "arg": 1}
        finally:
            client.close()
    finally:
        await server.close()


async def test_drain_lets_in_flight_calls_reply(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor, vhost: str
) -> None:
    server = RPCServer(make_config(amqp_url), RecordingScheduler(delay=1.0), RecordingEvents())
    await server.start(timeout=20)
    try:
        call = asyncio.ensure_future(
            in_thread(pool, client.select_destinations, request_spec_primitive(), [iu("d1")])
        )
        async with asyncio.timeout(10):
            while server.health()["active_calls"] == 0:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await server.drain(10)
        assert len(await call) == 1
        queues = list_json("list_queues", vhost, "name", "consumers")
        assert {q["name"]: q["consumers"] for q in queues}["scheduler"] == 0
    finally:
        await server.close()


async def test_drain_hands_back_held_calls_that_have_not_started(
    amqp_url: str, client: OsloSchedulerClient, pool: ThreadPoolExecutor, vhost: str
) -> None:
    """One call runs, three wait in the process for its slot: a stopping scheduler answers the
    first and gives the other three back to RabbitMQ at once, where the next one takes them."""
    first = RecordingScheduler(delay=1.0)
    server = RPCServer(make_config(amqp_url, max_concurrent=1), first, RecordingEvents())
    await server.start(timeout=20)
    uuids = [iu(f"h{i}") for i in range(4)]
    try:
        calls = [
            asyncio.ensure_future(
                in_thread(pool, client.select_destinations, request_spec_primitive(), [u])
            )
            for u in uuids
        ]
        async with asyncio.timeout(10):
            while server.health()["in_flight"] < 4 or not server.health()["active_calls"]:  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        await server.drain(10)
        assert server.stats.handed_back == 3 and sum(first.per_instance.values()) == 1
        ready = {
            q["name"]: q["messages_ready"]
            for q in list_json("list_queues", vhost, "name", "messages_ready")
        }
        assert ready["scheduler"] == 3  # back in RabbitMQ, not waiting out drain_timeout
    finally:
        await server.close()
    second = RecordingScheduler()
    async with RPCServer(make_config(amqp_url), second, RecordingEvents()):
        results = await asyncio.gather(*calls)
    assert len(results) == 4
    assert first.per_instance + second.per_instance == {u: 1 for u in uuids}


# ------------------------------------------------------------------ declarations vs real oslo


def _oslo_listen(url: str, exchange: str, host: str, rabbit: dict[str, Any]) -> Callable[[], None]:
    """Start a real oslo.messaging RPC server (what nova-scheduler runs) and return its stop."""
    transport = messaging.get_rpc_transport(cfg.CONF, url=url)
    for name, value in rabbit.items():
        cfg.CONF.set_override(name, value, group="oslo_messaging_rabbit")
    target = messaging.Target(topic="scheduler", server=host, exchange=exchange)

    class Endpoint:
        target = messaging.Target(version="4.5")

    server = messaging.get_rpc_server(transport, target, [Endpoint()], executor="threading")
    server.start()

    def stop() -> None:
        try:
            server.stop()
            server.wait()
            transport.cleanup()
        finally:
            for name in rabbit:
                cfg.CONF.clear_override(name, group="oslo_messaging_rabbit")

    return stop


def _entities(vhost: str) -> tuple[dict[str, Any], dict[str, Any]]:
    exchanges = {
        e["name"]: (e["type"], e["durable"], e["auto_delete"])
        for e in list_json("list_exchanges", vhost, "name", "type", "durable", "auto_delete")
        if e["name"] in ("nova", "scheduler_fanout")
    }
    queues: dict[str, Any] = {}
    for q in list_json("list_queues", vhost, "name", "durable", "auto_delete", "arguments"):
        name = q["name"]
        key = "scheduler_fanout_*" if name.startswith("scheduler_fanout_") else name
        # Compare argument values, not their AMQP encodings (byte vs signedint for 10).
        args = sorted((a[0], a[2]) for a in q["arguments"])
        queues.setdefault(key, []).append((q["durable"], q["auto_delete"], args))
    return exchanges, queues


@pytest.mark.parametrize(
    "rabbit",
    [
        {},
        {
            "rabbit_quorum_queue": True,
            "rabbit_transient_quorum_queue": True,
            "rabbit_quorum_delivery_limit": 10,
        },
    ],
    ids=["defaults", "quorum"],
)
async def test_declarations_equal_a_real_oslo_server(
    vhost: str, amqp_url: str, rabbit: dict[str, Any]
) -> None:
    host = "sched-decl"
    stop_oslo = await asyncio.to_thread(_oslo_listen, amqp_url, "nova", host, rabbit)
    try:
        oslo_exchanges, oslo_queues = await asyncio.to_thread(_entities, vhost)
        # Ours declares the same entities: RabbitMQ would answer 406 on any difference.
        server = RPCServer(
            make_config(amqp_url, host=host, **rabbit), RecordingScheduler(), RecordingEvents()
        )
        await server.start(timeout=20)
        try:
            exchanges, queues = await asyncio.to_thread(_entities, vhost)
        finally:
            await server.close()
    finally:
        await asyncio.to_thread(stop_oslo)
    assert exchanges == oslo_exchanges and set(exchanges) == {"nova", "scheduler_fanout"}
    assert set(queues) == {"scheduler", f"scheduler.{host}", "scheduler_fanout_*"}
    assert queues["scheduler"] == oslo_queues["scheduler"]
    ours, theirs = queues["scheduler_fanout_*"]  # one fanout queue each, identical flags
    assert ours == theirs


async def test_mismatched_flags_are_reported_not_silently_redeclared(
    vhost: str, amqp_url: str
) -> None:
    quorum = {"rabbit_quorum_queue": True, "rabbit_transient_quorum_queue": True}
    stop_oslo = await asyncio.to_thread(_oslo_listen, amqp_url, "nova", "sched-q", quorum)
    try:
        server = RPCServer(
            make_config(amqp_url, host="sched-q"), RecordingScheduler(), RecordingEvents()
        )
        try:
            with pytest.raises(TimeoutError, match=r"PRECONDITION_FAILED|inequivalent"):
                await server.start(timeout=3)
        finally:
            await server.close()
    finally:
        await asyncio.to_thread(stop_oslo)
