"""Big and wide messages (issue #21, item 3): refused clearly, read without holding the loop.

An argument object of 500,000 small keys held the loop 2.5 s. Now a message is refused before
parsing when it holds more than ``wire.MAX_VALUES`` values, an integer longer than
``wire.MAX_INT_DIGITS`` digits is refused while parsing, and the server reads a body in steps
with loop turns between them. Here, without a clock: the wide message never reaches the JSON
parser; ``bench/bench_rpc_wide.py`` compares its loop step with a benign one's.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from asyncsched.common.pacing import Pacer
from asyncsched.rpc import paced, wire
from asyncsched.rpc.wire import MalformedMessage, ReplyAddress
from tests.support import nova_objects
from tests.support.rpc_fakes import (
    Events,
    FakeMessage,
    Journal,
    Scheduler,
    _body,
    _call,
    _deliver,
    _replies,
    _server,
    benign_message,
    wide_message,
)

MAX = 16 * 1024 * 1024
ADDRESS = ReplyAddress(reply_q="reply_q1", msg_id="m-w")


def _with_args(uid: str, args: dict[str, Any]) -> dict[str, Any]:
    inner = _call(uid)
    inner["args"] = {**inner["args"], **args}
    return inner


def test_a_message_over_the_value_budget_is_refused_before_parsing() -> None:
    wide = _body(_with_args("w", {"wide": {f"k{i}": 0 for i in range(wire.MAX_VALUES)}}))
    with pytest.raises(MalformedMessage, match="JSON values") as info:
        wire.decode_body(wide, MAX)
    assert info.value.address == ADDRESS
    # At the budget it parses: nova's 10,000-instance request is far below it.
    ok = _body(_with_args("w", {"wide": {f"k{i}": 0 for i in range(wire.MAX_VALUES - 1000)}}))
    assert len(wire.decode_body(ok, MAX)["args"]["wide"]) == wire.MAX_VALUES - 1000


@pytest.mark.parametrize("digits", [wire.MAX_INT_DIGITS + 1, 4300, 100_000])
def test_a_huge_integer_is_refused_with_its_reason(digits: int) -> None:
    body = _body(_with_args("w", {"n": 7})).replace(b'\\"n\\": 7', b'\\"n\\": ' + b"9" * digits)
    with pytest.raises(MalformedMessage, match="an integer of") as info:
        wire.decode_body(body, MAX)
    assert info.value.address == ADDRESS
    fine = _body(_with_args("w", {"n": 7})).replace(b"7}", b"-" + b"9" * wire.MAX_INT_DIGITS + b"}")
    assert wire.decode_body(fine, MAX)["args"]["n"] == -int("9" * wire.MAX_INT_DIGITS)


def test_value_bound_is_an_upper_bound() -> None:
    values: list[Any] = [[], {}, [1, [2, {"a": [3, 4]}]], {"a": "x,y,[z]"}, [[[[]]]], {"a": {}}]
    for value in values:
        text = json.dumps(value).encode()
        nodes = _count(value)
        assert wire.value_bound(text) >= nodes - 1, value


def _count(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + sum(_count(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(_count(v) for v in value)
    return 1


def test_failure_reasons_are_brief() -> None:
    failure = json.loads(wire.malformed_failure("x" * 100_000))
    assert len(failure["message"]) < wire.MAX_REASON + 100


async def test_500000_keys_are_refused_before_any_parse_and_a_benign_message_that_size_served(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The server counts a body's values (``wire.value_bound``, in C) before parsing it: the
    500,000-key message is never handed to the JSON parser, which is what held the loop 2.5 s;
    a benign message of the same size is parsed and served. The loop step of each, compared,
    is ``bench/bench_rpc_wide.py``'s."""
    hostile = wide_message()
    benign = benign_message(hostile)
    parsed: list[int] = []
    real = wire._loads

    def counted(text: str, invalid: str, body: bytes) -> Any:
        parsed.append(len(text))
        return real(text, invalid, body)

    monkeypatch.setattr(wire, "_loads", counted)
    journal = Journal()
    server = _server(Scheduler(), Events(), journal)
    await _deliver(server, journal, hostile)
    assert parsed == []
    failure = json.loads(_replies(journal)[0]["failure"])
    assert "JSON values" in failure["message"] and failure["class"] == "ValueError"
    journal.events.clear()
    await _deliver(server, journal, benign)
    assert len(parsed) == 2  # the envelope, then the message
    assert _replies(journal)[0]["failure"] is None


async def test_decoding_goes_in_steps_with_a_turn_between_them() -> None:
    body = _body(_call("s"))
    steps = wire.decode_steps(body, MAX)
    assert next(steps) is None and next(steps) is None  # after the outer parse, the inner
    with pytest.raises(StopIteration) as done:
        next(steps)
    assert done.value.value == wire.decode_body(body, MAX)
    pacer = Pacer(budget=0.0)  # a turn after every step
    assert await paced.drive(wire.decode_steps(body, MAX), pacer) == wire.decode_body(body, MAX)
    assert pacer.yields == 2


async def test_a_big_cast_read_in_turns_is_not_overtaken(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first fanout cast's read takes loop turns (as a big one's does); the small cast
    behind it still comes second."""
    made: list[Pacer] = []

    class FirstSlow(Pacer):
        async def tick(self) -> None:
            if self is made[0]:
                for _ in range(5):
                    await asyncio.sleep(0)

    def pacer() -> Pacer:
        made.append(FirstSlow())
        return made[-1]

    monkeypatch.setattr("asyncsched.rpc.server.Pacer", pacer)
    journal, events = Journal(), Events()
    server = _server(Scheduler(), events, journal)
    fanout = next(
        d for d in server.topology.queues if d.exchange == server.topology.fanout_exchange
    )
    info = nova_objects.encode_instance_list(["i"])
    update = {"host_name": "cn-1", "instance_info": info}
    delete = {"host_name": "cn-1", "instance_uuid": "i"}
    for i, (method, args) in enumerate(
        [("update_instance_info", update), ("delete_instance_info", delete)]
    ):
        inner = {"method": method, "version": "4.2", "args": args, "_unique_id": f"o{i}"}
        message = FakeMessage(journal, _body(inner))
        await server._on_message(fanout, cast(AbstractIncomingMessage, message))
    await asyncio.gather(*server._tasks)
    assert [name for name, _ in events.seen] == ["update_instance_info", "delete_instance_info"]
