"""``[asyncsched] max_held_bytes`` against the real RabbitMQ (issue #21, item 8).

A flood of 1 MiB calls, more than the byte budget holds: the process never holds more bytes
than the budget (the ones that do not fit go back to RabbitMQ unread and consuming pauses),
and every call is still answered, once, and scheduled once. The same flood without the budget
is the control: the prefetch alone lets the process hold all of it.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import replace
from typing import Any

import aio_pika
import pytest

from asyncsched.rpc.server import RPCServer
from tests.support.broker import make_config
from tests.support.decisions import RecordingEvents, RecordingScheduler
from tests.support.oslo_caller import nova_context, request_spec_primitive

pytestmark = pytest.mark.integration

CALLS = 12
MiB = 1024 * 1024
BUDGET = 3 * MiB


def _big_call(reply_q: str, msg_id: str, instance: str) -> bytes:
    """A select_destinations of about 1 MiB: its context carries long notes (kept, unused)."""
    inner: dict[str, Any] = {
        **{f"_context_{k}": v for k, v in nova_context().items()},
        "_context_notes": ["n" * 60_000] * 17,
        "method": "select_destinations",
        "version": "4.5",
        "args": {
            "spec_obj": request_spec_primitive(),
            "instance_uuids": [instance],
            "return_objects": True,
            "return_alternates": True,
        },
        "_msg_id": msg_id,
        "_reply_q": reply_q,
        "_unique_id": uuid.uuid4().hex,
    }
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)}).encode()


async def _flood(amqp_url: str, max_held_bytes: int) -> tuple[RPCServer, RecordingScheduler]:
    config = make_config(amqp_url, max_concurrent=1)
    config = replace(config, asyncsched=replace(config.asyncsched, max_held_bytes=max_held_bytes))
    scheduler = RecordingScheduler(delay=0.05)
    server = RPCServer(config, scheduler, RecordingEvents())
    answers: dict[str, int] = {}
    async with server:
        conn = await aio_pika.connect(amqp_url.replace("rabbit://", "amqp://"))
        async with conn:
            channel = await conn.channel()
            reply_q = await channel.declare_queue(f"reply_{uuid.uuid4().hex}", exclusive=True)
            done = asyncio.Event()

            async def on_reply(message: aio_pika.abc.AbstractIncomingMessage) -> None:
                reply = json.loads(json.loads(message.body)["oslo.message"])
                if reply.get("ending"):
                    assert reply["failure"] is None, reply["failure"]
                    answers[reply["_msg_id"]] = answers.get(reply["_msg_id"], 0) + 1
                    if len(answers) == CALLS:
                        done.set()

            await reply_q.consume(on_reply, no_ack=True)
            exchange = await channel.get_exchange("nova")
            for i in range(CALLS):
                body = _big_call(reply_q.name, f"m{i}", str(uuid.uuid5(uuid.NAMESPACE_OID, str(i))))
                await exchange.publish(aio_pika.Message(body), routing_key="scheduler")
            await asyncio.wait_for(done.wait(), timeout=60)
            await asyncio.sleep(0.2)  # a second reply to any call would arrive by now
    assert answers == {f"m{i}": 1 for i in range(CALLS)}  # every call answered, once
    assert sorted(scheduler.per_instance.values()) == [1] * CALLS  # and scheduled once
    return server, scheduler


async def test_a_flood_of_big_calls_stays_within_max_held_bytes(amqp_url: str) -> None:
    server, _ = await _flood(amqp_url, BUDGET)
    held = server._held
    assert held.peak <= BUDGET, held.peak
    assert server.stats.over_held_bytes >= 1 and server.stats.flow_pauses >= 1
    assert server.health()["held_bytes"] == 0


async def test_without_the_budget_the_same_flood_is_all_held(amqp_url: str) -> None:
    server, _ = await _flood(amqp_url, 256 * MiB)
    assert server._held.peak > BUDGET  # the control: the budget above is what bounded it
    assert server.stats.over_held_bytes == 0
