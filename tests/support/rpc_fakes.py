"""RPCServer without a broker: a fake channel that records publishes and acks in a journal,
a recording scheduler and events, and the helpers that build and deliver oslo calls.
Shared by the RPC server unit tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage

from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import AsyncschedOptions, Config, DefaultOptions
from asyncsched.exceptions import NoValidHost
from asyncsched.logs import RequestIds, current_request_ids
from asyncsched.objects.models import Aggregate, RequestSpec, Selection
from asyncsched.rpc.server import RPCServer
from tests.support import nova_primitives as P
from tests.support.decisions import SchedulerCall, SchedulerFake

I1 = "6f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
I2 = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"


class Journal:
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []


class FakeExchange:
    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def publish(self, message: Any, routing_key: str, **kw: Any) -> None:
        assert message.content_type == "application/json"
        assert kw["mandatory"] is True
        outer = json.loads(message.body)
        self.journal.events.append(("publish", (routing_key, json.loads(outer["oslo.message"]))))


class FakeChannel:
    def __init__(self, journal: Journal) -> None:
        self.default_exchange = FakeExchange(journal)


class FakeMessage:
    def __init__(
        self,
        journal: Journal,
        body: bytes,
        headers: dict[str, Any] | None = None,
        redelivered: bool = False,
    ):
        self.journal = journal
        self.body = body
        self.headers = headers or {}
        self.redelivered = redelivered

    async def ack(self) -> None:
        self.journal.events.append(("ack", None))

    async def reject(self, requeue: bool = False) -> None:
        self.journal.events.append(("reject", requeue))


class Scheduler(SchedulerFake):
    """Records each call (and the log's request ids while it runs); NoValidHost above 64
    VCPU, an internal error (with a secret in its text) at exactly 13."""

    def __init__(self, delay: float = 0.0) -> None:
        super().__init__()
        self.calls: list[tuple[RequestSpec, Sequence[str] | None, bool, bool]] = []
        self.delay = delay
        self.log_ids: list[RequestIds | None] = []

    async def decide(self, call: SchedulerCall) -> list[list[Selection]]:
        spec, instance_uuids = call.spec, call.instance_uuids
        self.calls.append((spec, instance_uuids, call.return_objects, call.return_alternates))
        self.log_ids.append(current_request_ids())
        await asyncio.sleep(self.delay)
        if spec.flavor.vcpus > 64:
            raise NoValidHost(reason="no host has that many VCPU")
        if spec.flavor.vcpus == 13:
            raise RuntimeError("password=hunter2 in a bug")
        sel = Selection(
            compute_node_uuid="cn-uuid",
            service_host="cn-1",
            nodename="cn-1",
            cell_uuid="cell-uuid",
            allocation_request="{}",
            allocation_request_version="1.36",
            availability_zone="nova",
        )
        return [[sel, replace(sel, service_host="cn-2")] for _ in instance_uuids or [""]]


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None:
        self.seen.append(("update_aggregates", tuple(aggregates)))

    async def delete_aggregate(self, aggregate: Aggregate) -> None:
        self.seen.append(("delete_aggregate", aggregate))

    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        self.seen.append(("update_instance_info", (host_name, tuple(instance_uuids))))

    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None:
        self.seen.append(("delete_instance_info", (host_name, instance_uuid)))

    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        self.seen.append(("sync_instance_info", (host_name, tuple(instance_uuids))))


def _server(
    scheduler: Scheduler,
    events: Events,
    journal: Journal,
    recorder: Recorder = NO_RECORDER,
    **opts: Any,
) -> RPCServer:
    config = Config(
        default=replace(DefaultOptions(), host="unit"),
        asyncsched=replace(AsyncschedOptions(), **opts),
    )
    server = RPCServer(config, scheduler, events, recorder=recorder)
    server._link._publisher = cast(AbstractChannel, FakeChannel(journal))
    server._link._connected.set()
    return server


def _body(inner: dict[str, Any]) -> bytes:
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)}).encode()


def _call(uid: str = "u-1", **args: Any) -> dict[str, Any]:
    return {
        "method": "select_destinations",
        "version": "4.5",
        "args": {
            "spec_obj": P.request_spec(),
            "instance_uuids": [I1, I2],
            "return_objects": True,
            "return_alternates": True,
            **args,
        },
        "_msg_id": "m-" + uid,
        "_reply_q": "reply_q1",
        "_unique_id": uid,
        "_context_request_id": "req-" + uid,
        "_context_auth_token": "SECRET",
    }


def wide_message() -> bytes:
    """A call whose arguments hold an object of 500,000 small keys (it held the loop 2.5 s)."""
    inner = _call("h")
    inner["args"] = {**inner["args"], "wide": {f"k{i}": 0 for i in range(500_000)}}
    return _body(inner)


def benign_message(like: bytes) -> bytes:
    """A call as large as ``like``, of a few long strings (each within validation.MAX_STRING)."""
    pad = (len(like) - len(_body(_call("b")))) // 60_000
    inner = _call("b")
    inner["args"] = {**inner["args"], "notes": ["x" * 59_990] * pad}
    benign = _body(inner)
    assert abs(len(benign) - len(like)) < 0.02 * len(like)
    return benign


async def _deliver(
    server: RPCServer, journal: Journal, body: bytes, redelivered: bool = False
) -> None:
    decl = server.topology.queues[0]
    await server._handle(
        decl, cast(AbstractIncomingMessage, FakeMessage(journal, body, redelivered=redelivered))
    )


def _replies(journal: Journal) -> list[dict[str, Any]]:
    return [value[1] for kind, value in journal.events if kind == "publish"]
