"""A RabbitMQ restart with select_destinations calls in flight: nothing lost, nothing twice.

The broker application is restarted for real (``rabbitmqctl stop_app`` / ``start_app``): every
connection drops and non-durable queues vanish, among them the oslo caller's ``reply_<uuid>``
queue. With ``[oslo_messaging_rabbit] amqp_durable_queues = true`` on both sides, as a
deployment that wants this guarantee configures it, the ``scheduler`` queue is durable and the
caller's requests are persistent (kombu's default), so RabbitMQ redelivers every request we had
not acked yet. The caller is the real oslo.messaging RPCClient, one thread per call, as in a
conductor.

What must hold: each caller gets the answer for its own instance; each instance is scheduled
exactly once in our process although its request was delivered twice (the reply cache or the
still-running twin answers the redelivery); calls made while the broker is down are sent by
oslo once it is back and served; our server reconnects; nothing is left in the queue.

It restarts a RabbitMQ node of its own (``tests.support.private_broker``), never the shared
broker other test runs use. To point it at another node instead, set
``ASYNCSCHED_RESTART_RABBIT_NODE`` (e.g. ``h9dev@localhost``) and
``ASYNCSCHED_RESTART_RABBIT_PORT`` (its AMQP port).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest

from asyncsched.objects import codec
from asyncsched.objects.models import Selection
from asyncsched.rpc.broker import ClosingConnection
from asyncsched.rpc.server import RPCServer
from tests.support.broker import RABBITMQCTL, make_config
from tests.support.decisions import RecordingEvents, SchedulerCall, SchedulerFake, fake_selection
from tests.support.oslo_caller import OsloSchedulerClient, nova_context, request_spec_primitive
from tests.support.private_broker import private_broker
from tests.support.tcp_proxy import TcpProxy, tcp_proxy

pytestmark = pytest.mark.integration

IN_FLIGHT = 8  # calls running in our process when the broker stops
SENT_WHILE_DOWN = 2  # calls the caller makes while the broker is stopped
DURABLE = {"amqp_durable_queues": True}
# Generous bounds on each wait: they only decide how long a failure takes to show, never what
# passes (a loaded 2-core machine may take tens of seconds to restart a broker node).
GUARD_S = 120


@dataclass(frozen=True)
class Broker:
    """The RabbitMQ node the test restarts, and the throwaway vhost it uses on it."""

    node: str | None
    port: int
    vhost: str

    @property
    def url(self) -> str:
        return self.url_at(self.port)

    def url_at(self, port: int) -> str:
        """The vhost's transport_url through ``port`` (a proxy in front of the node)."""
        return f"rabbit://guest:guest@127.0.0.1:{port}/{self.vhost}"

    def ctl(self, *args: str, timeout: float = 60) -> str:
        node = ["-n", self.node] if self.node else []
        done = subprocess.run(
            [RABBITMQCTL, *node, "-q", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return done.stdout

    def queues(self) -> dict[str, dict[str, Any]]:
        out = self.ctl(
            "list_queues",
            "-p",
            self.vhost,
            "name",
            "durable",
            "messages_ready",
            "messages_unacknowledged",
            "--formatter",
            "json",
        )
        return {q["name"]: q for q in json.loads(out or "[]")}

    def ensure_running(self, limit: float = 60.0) -> None:
        """start_app (a no-op on a running app), then wait until AMQP logins work again."""
        deadline = time.monotonic() + limit
        while True:
            try:
                self.ctl("start_app")
                self.ctl("await_startup")
                asyncio.run(self._probe())
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    async def queue_exists(self, name: str) -> bool:
        """A passive declare (milliseconds, unlike rabbitmqctl)."""
        conn = await aio_pika.connect(
            f"amqp://guest:guest@127.0.0.1:{self.port}/{self.vhost}", timeout=5
        )
        async with conn:
            channel = await conn.channel()
            try:
                await channel.declare_queue(name, passive=True)
            except aiormq.exceptions.ChannelNotFoundEntity:
                return False
            return True

    async def _probe(self) -> None:
        conn = await aio_pika.connect(
            f"amqp://guest:guest@127.0.0.1:{self.port}/{self.vhost}",
            timeout=5,
            connection_class=ClosingConnection,  # a refused attempt closes its Connection
        )
        await conn.close()


@pytest.fixture(scope="module")
def restart_node() -> Iterator[tuple[str, int]]:
    """The node this module restarts: the one named in the environment, else a private one."""
    named = os.environ.get("ASYNCSCHED_RESTART_RABBIT_NODE")
    if named:
        yield named, int(os.environ.get("ASYNCSCHED_RESTART_RABBIT_PORT", "5672"))
        return
    with private_broker() as node:
        yield node.node, node.port


@pytest.fixture
def broker(restart_node: tuple[str, int]) -> Iterator[Broker]:
    """A uuid-named vhost on the node; afterwards the node is running and the vhost gone."""
    node, port = restart_node
    b = Broker(node, port, f"asyncsched-restart-{uuid.uuid4().hex[:12]}")
    b.ctl("add_vhost", b.vhost)
    try:
        b.ctl("set_permissions", "-p", b.vhost, "guest", ".*", ".*", ".*")
        yield b
    finally:
        try:
            b.ensure_running()  # whatever happened, later tests need the broker
        finally:
            b.ctl("delete_vhost", b.vhost)


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    executor = ThreadPoolExecutor(
        max_workers=IN_FLIGHT + SENT_WHILE_DOWN, thread_name_prefix="oslo-caller"
    )
    yield executor
    executor.shutdown(wait=True, cancel_futures=True)


def host_for(instance_uuid: str) -> str:
    return f"cn-{instance_uuid[:8]}"


class GatedScheduler(SchedulerFake):
    """Records each (instance uuid, request id) it schedules; each call takes its ``delays`` s.

    A call first waits for ``gate``: the test opens it once the broker connection is gone, so
    every call is guaranteed to be running across the restart (none answered before it).
    """

    def __init__(self, delays: Mapping[str, float]) -> None:
        super().__init__()
        self.delays = dict(delays)
        self.gate = asyncio.Event()
        self.scheduled: list[tuple[str, str | None]] = []
        self.finished = 0

    async def decide(self, call: SchedulerCall) -> list[list[Selection]]:
        uuids = list(call.instance_uuids or ())
        self.scheduled.extend((u, call.ctx.request_id) for u in uuids)
        await self.gate.wait()
        await asyncio.sleep(max(self.delays[u] for u in uuids))
        self.finished += 1
        out = []
        for u in uuids:
            node = str(uuid.uuid5(uuid.NAMESPACE_URL, u))
            used = {"VCPU": call.spec.flavor.vcpus}
            out.append([fake_selection(host_for(u), f"{host_for(u)}.local", node, used)])
        return out


def conductor_call(
    pool: ThreadPoolExecutor, client: OsloSchedulerClient, instance_uuid: str, context: Any
) -> asyncio.Future[Any]:
    """select_destinations for one instance from a thread of ``pool``, as a conductor calls."""
    spec = request_spec_primitive()
    return asyncio.get_running_loop().run_in_executor(
        pool, lambda: client.select_destinations(spec, [instance_uuid], context=context)
    )


async def eventually(check: Callable[[], bool], limit: float, what: str) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        await asyncio.sleep(0.05)


async def eventually_in_thread(check: Callable[[], bool], limit: float, what: str) -> None:
    """``eventually`` for a blocking check (rabbitmqctl)."""
    deadline = time.monotonic() + limit
    while not await asyncio.to_thread(check):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {limit}s waiting for {what}")
        await asyncio.sleep(0.2)


@dataclass(frozen=True)
class Scenario:
    """How the restart unfolds.

    ``rabbit``: ``[oslo_messaging_rabbit]`` of both sides; ``caller_back_last``: the caller's
    way to the broker (a proxy) stays closed until the test has looked at what our server did
    while the caller was away: our server is back first and answers meanwhile. Held by the
    test, not by a reconnect delay, so no amount of load lets the caller in early;
    ``gate_after_redelivery``: the calls start working only once their redeliveries arrived
    (else as soon as the connection dropped, so they finish while the broker is down).
    """

    rabbit: Mapping[str, Any]
    caller_back_last: bool
    gate_after_redelivery: bool

    @property
    def reply_queue_survives(self) -> bool:
        return bool(self.rabbit.get("rabbit_transient_quorum_queue"))


SCENARIOS = {
    # Our server is back before the caller: every reply meets a missing reply queue
    # (basic.return) and is retried until oslo has declared it again; the redeliveries are
    # answered from the reply cache.
    "replies-wait-for-the-reply-queue": Scenario(
        DURABLE, caller_back_last=True, gate_after_redelivery=False
    ),
    # The redeliveries arrive while the original runs are still going: they wait for them.
    "redelivery-joins-the-running-call": Scenario(
        DURABLE, caller_back_last=False, gate_after_redelivery=True
    ),
    # The other way a deployment keeps requests across a restart: quorum queues, here also for
    # the transient ones (oslo's reply queue and our fanout queue then survive the restart).
    "quorum-queues": Scenario(
        {"rabbit_quorum_queue": True, "rabbit_transient_quorum_queue": True},
        caller_back_last=True,
        gate_after_redelivery=False,
    ),
}


@pytest.fixture
def caller_door(broker: Broker) -> Iterator[TcpProxy]:
    """The caller's way to the broker: a proxy the test can close (``cut``) and reopen."""
    with tcp_proxy("127.0.0.1", broker.port) as proxy:
        yield proxy


class Restart:
    """One scenario's run: our server, the oslo caller (behind ``door``) and their calls."""

    def __init__(
        self, broker: Broker, door: TcpProxy, pool: ThreadPoolExecutor, scenario: Scenario
    ) -> None:
        self.broker, self.door, self.pool, self.scenario = broker, door, pool, scenario
        self.in_flight = [str(uuid.uuid4()) for _ in range(IN_FLIGHT)]
        self.while_down = [str(uuid.uuid4()) for _ in range(SENT_WHILE_DOWN)]
        self.contexts = {u: nova_context() for u in self.in_flight + self.while_down}
        delays = {u: 1.0 + i / (IN_FLIGHT - 1) for i, u in enumerate(self.in_flight)}  # 1..2 s
        delays.update({u: 1.0 for u in self.while_down})
        self.scheduler = GatedScheduler(delays)
        # Our server polls the stopped broker every <= 0.5 s, so it is back soon after the
        # broker. It retries an undelivered reply for kombu_missing_consumer_retry_timeout
        # (60 s by default): generous here, as the caller is held away for as long as a loaded
        # machine takes to restart the broker.
        config = make_config(
            broker.url,
            rabbit_interval_max=0.5,
            kombu_missing_consumer_retry_timeout=GUARD_S,
            **scenario.rabbit,
        )
        self.server = RPCServer(config, self.scheduler, RecordingEvents())
        # nova's own timeouts are long (long_rpc_timeout 1800 s, rpc_response_timeout 60 s);
        # the call monitor sees no heartbeat while the caller is held away, so it is a guard
        # too. The caller retries its connection every second (rabbit_interval_max).
        self.client = OsloSchedulerClient(
            broker.url_at(door.port),
            timeout=3 * GUARD_S,
            call_monitor_timeout=GUARD_S,
            rabbit_options={**scenario.rabbit, "rabbit_interval_max": 1},
        )
        self.calls: dict[str, asyncio.Future[Any]] = {}

    def call(self, uuids: list[str]) -> None:
        for u in uuids:
            self.calls[u] = conductor_call(self.pool, self.client, u, self.contexts[u])

    async def close(self) -> None:
        try:
            await self.server.close()
        finally:
            await asyncio.to_thread(self.door.restore)  # a failed run may leave it cut
            await asyncio.to_thread(self.client.close)


@pytest.mark.parametrize("scenario", list(SCENARIOS.values()), ids=list(SCENARIOS))
async def test_broker_restart_redelivers_in_flight_calls_and_duplicates_are_recognised(
    broker: Broker, caller_door: TcpProxy, pool: ThreadPoolExecutor, scenario: Scenario
) -> None:
    run = Restart(broker, caller_door, pool, scenario)
    scheduler, server = run.scheduler, run.server
    try:
        await server.start(timeout=20)
        run.call(run.in_flight)
        reply_name = await _all_in_flight_unacked(run)
        await _restart_broker(run)
        await eventually(
            lambda: server.stats.duplicates == IN_FLIGHT,
            GUARD_S,
            "the server to recognise every redelivery",
        )
        if scenario.gate_after_redelivery:
            # Each redelivery was recognised while its original run was still going.
            assert scheduler.finished == 0
            scheduler.gate.set()
        if scenario.caller_back_last:
            await _answered_while_the_caller_is_away(run, reply_name)
            await asyncio.to_thread(caller_door.restore)

        results = await asyncio.wait_for(asyncio.gather(*run.calls.values()), timeout=GUARD_S)
        answers = dict(zip(run.calls, results, strict=True))
        await eventually_in_thread(
            lambda: _drained(broker.queues()), GUARD_S, "every request to be acked after its reply"
        )
        # Each in-flight request is answered twice (its original run once the broker was back,
        # and its redelivery); oslo keeps the first reply and drops the other, which may still
        # be on its way when the caller returns.
        await eventually(
            lambda: server.stats.replies == IN_FLIGHT * 2 + SENT_WHILE_DOWN,
            GUARD_S,
            "both replies of every in-flight request",
        )
        health = server.health()
    finally:
        await run.close()

    # Each caller got the answer for its own instance.
    for u, result in answers.items():
        assert len(result) == 1 and len(result[0]) == 1, result
        chosen = codec.decode_selection(result[0][0])
        assert chosen.service_host == host_for(u)
        assert chosen.compute_node_uuid == str(uuid.uuid5(uuid.NAMESPACE_URL, u))
    # Each instance scheduled exactly once, under its caller's request id.
    assert Counter(scheduler.scheduled) == Counter(
        (u, ctx["request_id"]) for u, ctx in run.contexts.items()
    )
    # RabbitMQ redelivered every in-flight request once and each redelivery was recognised.
    assert health["stats"]["duplicates"] == IN_FLIGHT
    assert health["stats"]["received"] == IN_FLIGHT * 2 + SENT_WHILE_DOWN
    assert health["stats"]["replies"] == IN_FLIGHT * 2 + SENT_WHILE_DOWN
    assert health["stats"]["replies_dropped"] == 0
    if scenario.caller_back_last and not scenario.reply_queue_survives:
        # Every in-flight reply met the missing reply queue and was delivered by a retry.
        assert health["stats"]["replies_late"] >= IN_FLIGHT * 2
    assert health["stats"]["reconnects"] >= 1
    assert health["connected"] is True and health["last_error"] is None


async def _all_in_flight_unacked(run: Restart) -> str:
    """Every call reached the scheduler and waits, unacked, in the durable topic queue.

    (A quorum queue reports its counts with a delay.) The caller's reply queue is not durable
    unless quorum: the restart removes it and oslo declares it again when it reconnects.
    Returns the reply queue's name.
    """
    await eventually(
        lambda: len(run.scheduler.scheduled) == IN_FLIGHT,
        GUARD_S,
        "every call to reach the scheduler",
    )
    before: dict[str, dict[str, Any]] = {}

    def all_unacked() -> bool:
        before.update(run.broker.queues())
        return bool(before["scheduler"]["messages_unacknowledged"] == IN_FLIGHT)

    await eventually_in_thread(all_unacked, GUARD_S, "the broker to count the unacked calls")
    assert before["scheduler"]["durable"] is True
    ((reply_name, reply_q),) = [q for q in before.items() if q[0].startswith("reply_")]
    assert reply_q["durable"] is run.scenario.reply_queue_survives
    return reply_name


async def _restart_broker(run: Restart) -> None:
    """stop_app with every call in flight; the caller keeps calling while the broker is down."""
    try:
        await asyncio.to_thread(run.broker.ctl, "stop_app")
        if run.scenario.caller_back_last:
            await asyncio.to_thread(run.door.cut)  # the caller stays away until restored
        await eventually(
            lambda: not run.server.health()["connected"], GUARD_S, "the connection drop"
        )
        assert run.scheduler.finished == 0  # every call is in flight across the restart
        if not run.scenario.gate_after_redelivery:
            run.scheduler.gate.set()
        run.call(run.while_down)  # oslo retries the publish until it is connected again
        await asyncio.sleep(0.5)
        assert not any(c.done() for c in run.calls.values())  # the broker is down
    finally:
        await asyncio.to_thread(run.broker.ensure_running)


async def _answered_while_the_caller_is_away(run: Restart, reply_name: str) -> None:
    """Our side answers every in-flight call (original and redelivery) before the caller is
    back; the caller is held away (its door is cut), so none of its calls has returned."""
    server = run.server
    await eventually(lambda: run.scheduler.finished == IN_FLIGHT, GUARD_S, "the original runs")
    assert server.health()["connected"]
    if run.scenario.reply_queue_survives:
        # The replies wait in the caller's (quorum) reply queue.
        await eventually(
            lambda: server.stats.replies == IN_FLIGHT * 2, GUARD_S, "replies into the reply queue"
        )
    else:
        # No reply queue: every reply is returned by the broker and retried in the background.
        assert not await run.broker.queue_exists(reply_name)
        await eventually(
            lambda: server.health()["replies_pending"] == IN_FLIGHT * 2,
            GUARD_S,
            "every reply to wait for the reply queue",
        )
        assert server.stats.replies == 0
    assert not any(c.done() for c in run.calls.values())
    assert server.stats.replies_dropped == 0


def _drained(queues: Mapping[str, Mapping[str, Any]]) -> bool:
    q = queues["scheduler"]
    return bool(q["messages_ready"] == 0 and q["messages_unacknowledged"] == 0)


async def test_with_transient_queues_the_calls_running_here_are_still_answered(
    broker: Broker, pool: ThreadPoolExecutor
) -> None:
    """nova's default ``amqp_durable_queues = false``: the restart removes the ``scheduler``
    queue and the unacked requests in it, so nothing is redelivered; the calls already running
    in our process are answered once the broker is back (a request still waiting in the queue,
    or sent while our server had not declared the queue again, would be lost: the broker drops
    what no queue is bound for, and oslo does not publish calls as mandatory).
    """
    in_flight = [str(uuid.uuid4()) for _ in range(IN_FLIGHT)]
    contexts = {u: nova_context() for u in in_flight}
    scheduler = GatedScheduler({u: 1.0 + i / (IN_FLIGHT - 1) for i, u in enumerate(in_flight)})
    config = make_config(broker.url, rabbit_interval_max=0.5)
    server = RPCServer(config, scheduler, RecordingEvents())
    client = OsloSchedulerClient(broker.url, timeout=3 * GUARD_S, call_monitor_timeout=GUARD_S)
    try:
        await server.start(timeout=20)
        calls = {u: conductor_call(pool, client, u, contexts[u]) for u in in_flight}
        await eventually(
            lambda: len(scheduler.scheduled) == IN_FLIGHT,
            GUARD_S,
            "every call to reach the scheduler",
        )
        assert (await asyncio.to_thread(broker.queues))["scheduler"]["durable"] is False
        try:
            await asyncio.to_thread(broker.ctl, "stop_app")
            await eventually(
                lambda: not server.health()["connected"], GUARD_S, "the connection drop"
            )
            assert scheduler.finished == 0
            scheduler.gate.set()
            await asyncio.sleep(0.5)
        finally:
            await asyncio.to_thread(broker.ensure_running)
        results = await asyncio.wait_for(asyncio.gather(*calls.values()), timeout=GUARD_S)
        await eventually_in_thread(
            lambda: _drained(broker.queues()), GUARD_S, "the re-declared queue to be empty"
        )
        health = server.health()
    finally:
        try:
            await server.close()
        finally:
            await asyncio.to_thread(client.close)
    for u, result in zip(calls, results, strict=True):
        assert codec.decode_selection(result[0][0]).service_host == host_for(u)
    assert Counter(scheduler.scheduled) == Counter(
        (u, contexts[u]["request_id"]) for u in in_flight
    )
    # Nothing came back from the broker: each request was received and answered once.
    assert health["stats"]["received"] == IN_FLIGHT
    assert health["stats"]["duplicates"] == 0
    assert health["stats"]["replies"] == IN_FLIGHT
    assert health["stats"]["reconnects"] >= 1 and health["connected"] is True
