"""The reply path gives the loop turns (issue #13) and sends the same bytes as before.

A 5,000-instance select_destinations reply with alternates is ~17 MB of JSON. The old path
encoded it in one ``json.dumps`` and escaped it into the envelope in another, holding the loop
for over half a second; ``rpc.paced`` encodes per instance and escapes in slices. The reference
below is the old one-shot code, spelled out, so a change of bytes on the wire shows here.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import replace
from typing import Any, cast

from aio_pika.abc import AbstractChannel, AbstractIncomingMessage
from hypothesis import given
from hypothesis import strategies as st

from asyncsched.common.pacing import Pacer
from asyncsched.conf.options import AsyncschedOptions, Config, DefaultOptions
from asyncsched.objects import codec
from asyncsched.objects.models import Aggregate, SchedulerLimits, Selection
from asyncsched.rpc import paced, wire
from asyncsched.rpc.server import RPCServer
from tests.support import nova_primitives as P
from tests.support.loop_gap import max_gap_while

BIG = 5000
UID = "0123456789abcdef0123456789abcdef"


def one_shot(msg_id: str, result: Any, failure: str | None, unique_id: str) -> bytes:
    """The reply encoding before pacing (wire.envelope + reply_body as they were)."""

    def default(value: Any) -> Any:
        if isinstance(value, set | frozenset | tuple):
            return list(value)
        return str(value)

    inner = {
        "result": result,
        "failure": failure,
        "ending": True,
        "_msg_id": msg_id,
        "_unique_id": unique_id,
    }
    payload = json.dumps(inner, default=default)
    return json.dumps({"oslo.version": "2.0", "oslo.message": payload}).encode("utf-8")


def _text(rng: random.Random, n: int) -> str:
    """Awkward text: quotes, backslashes, control characters, non-ASCII, astral, surrogates."""
    alphabet = 'ab"\\/\n\t\x00\x1f\x7fé中\u2028\U0001f600\ud800'
    return "".join(rng.choice(alphabet) for _ in range(n))


def _selection(rng: random.Random) -> Selection:
    return Selection(
        compute_node_uuid=str(uuid.UUID(int=rng.getrandbits(128))),
        service_host=_text(rng, rng.randrange(1, 12)),
        nodename=_text(rng, rng.randrange(1, 12)),
        cell_uuid=str(uuid.UUID(int=rng.getrandbits(128))),
        limits=rng.choice(
            [None, SchedulerLimits(vcpu=rng.randrange(64), memory_mb=rng.randrange(10**6))]
        ),
        allocation_request=rng.choice([None, json.dumps({"a": _text(rng, 20)})]),
        allocation_request_version=rng.choice([None, "1.36"]),
        availability_zone=rng.choice([None, "nova", _text(rng, 5)]),
    )


def _selections(rng: random.Random, instances: int) -> list[list[Selection]]:
    return [[_selection(rng) for _ in range(rng.choice([0, 1, 3]))] for _ in range(instances)]


async def _paced(
    selections: list[list[Selection]], return_objects: bool, slice_chars: int
) -> bytes:
    """What the server sends: methods' per-instance encoding, then paced.reply_body."""
    pacer = Pacer(budget=0.0)  # a turn after every step: the most slices, the most joins
    items = (e for one in selections for e in codec.encode_selections([one], return_objects))
    result = await paced.dumps_list(items, pacer)
    return await paced.reply_body(
        "m-1", result, None, pacer, unique_id=UID, slice_chars=slice_chars
    )


async def test_paced_reply_bytes_equal_the_one_shot_encoding() -> None:
    rng = random.Random(1313)
    selections = _selections(rng, 2000)
    for return_objects in (True, False):
        expected = one_shot("m-1", codec.encode_selections(selections, return_objects), None, UID)
        assert len(expected) > 100_000
        for slice_chars in (7, 4096, paced.ESCAPE_SLICE):
            got = await _paced(selections, return_objects, slice_chars)
            assert got == expected, (return_objects, slice_chars)
    # Casts, failures and other results go through the same function unchanged.
    for result, failure in ((None, None), (None, 'boom "quoted" é'), ({"k": (1, {2})}, None)):
        want = one_shot("m-1", result, failure, UID)
        got = await paced.reply_body("m-1", result, failure, Pacer(), unique_id=UID, slice_chars=3)
        assert got == want
        assert wire.reply_body("m-1", result, failure, True, unique_id=UID) == want


@given(st.text(), st.integers(min_value=1, max_value=9))
def test_escaping_in_slices_is_escaping_the_whole(text: str, size: int) -> None:
    pieces = [wire.escape(text[i : i + size]) for i in range(0, len(text), size)]
    assert b'"' + b"".join(pieces) + b'"' == json.dumps(text).encode()


# --------------------------------------------------------------------------------------------
# The loop while a 5,000-instance call is answered through the real server code.


class _Exchange:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def publish(self, message: Any, routing_key: str, **kw: Any) -> None:
        self.bodies.append(message.body)


class _Channel:
    def __init__(self) -> None:
        self.default_exchange = _Exchange()


class _Message:
    def __init__(self, body: bytes) -> None:
        self.body = body
        self.headers: dict[str, Any] = {}
        self.redelivered = False
        self.acked = False

    async def ack(self) -> None:
        self.acked = True

    async def reject(self, requeue: bool = False) -> None:
        raise AssertionError("a well-formed call was rejected")


class _BigAnswer:
    """Answers any call with ready-made selections: the test times the reply, not a decision."""

    def __init__(self, selections: list[list[Selection]]) -> None:
        self.selections = selections

    async def select_destinations(self, *args: Any) -> list[list[Selection]]:
        return self.selections


class _NoEvents:
    async def update_aggregates(self, aggregates: Any) -> None: ...
    async def delete_aggregate(self, aggregate: Aggregate) -> None: ...
    async def update_instance_info(self, host_name: str, instance_uuids: Any) -> None: ...
    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None: ...
    async def sync_instance_info(self, host_name: str, instance_uuids: Any) -> None: ...


def _selection_like_nova(i: int) -> Selection:
    cn = str(uuid.uuid4())
    alloc = {"allocations": {cn: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}, "mappings": {}}
    return Selection(
        compute_node_uuid=cn,
        service_host=f"cn-{i}",
        nodename=f"cn-{i}",
        cell_uuid=str(uuid.uuid4()),
        limits=SchedulerLimits(vcpu=64, memory_mb=65536, disk_gb=1000),
        allocation_request=json.dumps(alloc),
        allocation_request_version="1.36",
        availability_zone="nova",
    )


async def test_a_5000_instance_reply_keeps_the_loop_turning() -> None:
    selections = [[_selection_like_nova(3 * i + j) for j in range(3)] for i in range(BIG)]
    config = Config(default=replace(DefaultOptions(), host="unit"), asyncsched=AsyncschedOptions())
    server = RPCServer(config, cast(Any, _BigAnswer(selections)), _NoEvents())
    channel = _Channel()
    server._link._publisher = cast(AbstractChannel, channel)
    server._link._connected.set()
    inner = {
        "method": "select_destinations",
        "version": "4.5",
        "args": {"spec_obj": P.request_spec(), "return_objects": True, "return_alternates": True},
        "_msg_id": "m-big",
        "_reply_q": "reply_q1",
        "_unique_id": "u-big",
    }
    body = json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)}).encode()
    message = _Message(body)
    decl = server.topology.queues[0]
    steps = await max_gap_while(server._handle(decl, cast(AbstractIncomingMessage, message)))
    gap, took = steps.longest, steps.total  # CPU time of the loop thread, both
    assert message.acked
    (sent,) = channel.default_exchange.bodies
    assert len(sent) > 10_000_000
    reply = json.loads(json.loads(sent)["oslo.message"])
    assert reply["failure"] is None and reply["_msg_id"] == "m-big"
    assert len(reply["result"]) == BIG and len(reply["result"][0]) == 3
    assert codec.decode_selection(reply["result"][-1][2]) == selections[-1][2]
    # The one-shot path held the loop for the whole encoding (gap == took). Both are the loop
    # thread's CPU time, so a loaded machine slows neither side; the longest paced step left
    # is the envelope's one C-level dumps of the ~10 MB inner text (about a quarter of it).
    assert gap < took / 2, f"the loop stalled {gap:.3f} s during a {took:.2f} s reply"
