"""RPCServer against hostile input and broken callers, without a broker (fake channel).

Every call is answered whatever its ``_timeout``; a reply the broker returns is retried off the
intake path (bounded); a redelivery is recognised by id *and* body; requests beyond the bounds
get a ValueError naming the field before the scheduler sees them.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import aiormq.exceptions
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asyncsched.rpc.server import RPCServer
from tests.support import nova_primitives as P
from tests.support.rpc_fakes import (
    Events,
    FakeChannel,
    FakeExchange,
    Journal,
    Scheduler,
    _body,
    _call,
    _deliver,
    _replies,
    _server,
)


def _failure(reply: dict[str, Any]) -> dict[str, Any]:
    assert reply["ending"] is True and reply["result"] is None
    failure: dict[str, Any] = json.loads(reply["failure"])
    return failure


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400", '\\"nan\\"'])
async def test_any_timeout_gets_a_reply(literal: str) -> None:
    scheduler, journal = Scheduler(), Journal()
    server = _server(scheduler, Events(), journal)
    inner = _call("t")
    inner["_timeout"] = 7
    raw = _body(inner).replace(b'\\"_timeout\\": 7', f'\\"_timeout\\": {literal}'.encode())
    assert raw != _body(inner)
    await _deliver(server, journal, raw)
    (reply,) = _replies(journal)
    assert reply["failure"] is None and len(reply["result"]) == 2
    assert [k for k, _ in journal.events] == ["publish", "ack"]


async def test_a_reused_unique_id_with_another_body_is_scheduled_on_its_own() -> None:
    scheduler, journal = Scheduler(), Journal()
    server = _server(scheduler, Events(), journal)
    first = _call("same")
    second = _call("same", spec_obj=P.request_spec(flavor=P.flavor(vcpus=4)))
    second["_msg_id"] = "m-other"
    await _deliver(server, journal, _body(first))
    await _deliver(server, journal, _body(second))
    await _deliver(server, journal, _body(first))  # a true redelivery: answered from cache
    assert [c[0].flavor.vcpus for c in scheduler.calls] == [2, 4]
    assert [r["_msg_id"] for r in _replies(journal)] == ["m-same", "m-other", "m-same"]
    assert server.stats.duplicates == 1


class ReturningExchange(FakeExchange):
    """The broker returns (basic.return) replies to the queues in ``missing``."""

    def __init__(self, journal: Journal, missing: set[str]) -> None:
        super().__init__(journal)
        self.missing = missing

    async def publish(self, message: Any, routing_key: str, **kw: Any) -> None:
        if routing_key in self.missing:
            raise aiormq.exceptions.PublishError(None, None)  # type: ignore[arg-type]
        await super().publish(message, routing_key, **kw)


def _returning_server(journal: Journal, missing: set[str], **opts: Any) -> RPCServer:
    server = _server(Scheduler(), Events(), journal, **opts)
    channel = FakeChannel(journal)
    channel.default_exchange = ReturningExchange(journal, missing)
    server._link._publisher = channel  # type: ignore[assignment]
    return server


def _call_to(reply_q: str, uid: str) -> bytes:
    inner = _call(uid)
    inner["_reply_q"] = reply_q
    return _body(inner)


async def test_a_missing_reply_queue_does_not_hold_up_the_calls_behind_it() -> None:
    journal = Journal()
    server = _returning_server(journal, {"reply_gone"})
    # Inline retries would hold each delivery for kombu_missing_consumer_retry_timeout (60 s).
    async with asyncio.timeout(30):
        for i in range(40):
            await _deliver(server, journal, _call_to("reply_gone", f"gone-{i}"))
        await _deliver(server, journal, _call_to("reply_q1", "live"))
    assert [r["_msg_id"] for r in _replies(journal)] == ["m-live"]
    assert [k for k, _ in journal.events].count("ack") == 41  # every request left the queue
    assert server.health()["replies_pending"] == 40
    # The queue appears: the background retries deliver the late replies.
    server._link._publisher.default_exchange.missing.clear()  # type: ignore[union-attr]
    async with asyncio.timeout(5):
        while server.stats.replies_late < 40:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert len(_replies(journal)) == 41 and server.health()["replies_pending"] == 0
    await server.close()


async def test_background_reply_retries_are_bounded_and_give_up() -> None:
    journal = Journal()
    server = _returning_server(journal, {"reply_gone"}, max_pending_replies=3, reply_cache_size=100)
    server._late._retry_for = 0.6  # kombu_missing_consumer_retry_timeout, shortened
    for i in range(5):
        await _deliver(server, journal, _call_to("reply_gone", f"g{i}"))
    assert len(server._late) == 3 and server.stats.replies_dropped == 2
    async with asyncio.timeout(5):
        while len(server._late):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    assert server.stats.replies_dropped == 5 and server._late.held_bytes == 0
    await server.close()


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"instance_uuids": [str(uuid.uuid4())] * 2}, "args.instance_uuids[1]"),
        ({"instance_uuids": ["../resource_providers"]}, "args.instance_uuids[0]"),
        (
            {
                "spec_obj": P.request_spec(
                    flavor=P.flavor(extra_specs={"trait:CUSTOM_\ud800": "required"})
                )
            },
            "message.args.spec_obj",
        ),
        (
            {"spec_obj": P.request_spec(flavor=P.flavor(extra_specs={"trait:lower": "required"}))},
            "args.spec_obj.flavor.extra_specs['trait:lower']",
        ),
    ],
)
async def test_hostile_fields_get_a_value_error_naming_them(
    args: dict[str, Any], field: str
) -> None:
    scheduler, journal = Scheduler(), Journal()
    server = _server(scheduler, Events(), journal)
    await _deliver(server, journal, _body(_call("h", **args)))
    await _deliver(server, journal, _body(_call("next")))
    bad, good = _replies(journal)
    failure = _failure(bad)
    assert failure["class"] == "ValueError" and failure["module"] == "builtins"
    assert failure["message"].startswith(f"Malformed request: {field}")
    assert good["failure"] is None and len(scheduler.calls) == 1


async def test_an_absurd_legacy_num_instances_is_refused_before_any_work() -> None:
    scheduler, journal = Scheduler(), Journal()
    server = _server(scheduler, Events(), journal, max_instances_per_request=10000)
    inner = _call("huge")
    inner["version"] = "4.0"
    inner["args"] = {
        "request_spec": {
            "instance_type": {"memory_mb": 512, "vcpus": 1},
            "instance_properties": {"project_id": "p"},
            "num_instances": 10**15,
        },
        "filter_properties": {},
    }
    await _deliver(server, journal, _body(inner))
    failure = _failure(_replies(journal)[0])
    assert failure["message"] == (
        "Malformed request: args.request_spec.num_instances: 1000000000000000 instances "
        "requested; [asyncsched] max_instances_per_request allows 1 to 10000"
    )
    assert scheduler.calls == []


async def test_a_bug_after_parsing_still_answers_the_call(monkeypatch: pytest.MonkeyPatch) -> None:
    scheduler, journal = Scheduler(), Journal()
    server = _server(scheduler, Events(), journal)

    async def broken(*_: Any) -> None:
        raise KeyError("bug in intake")

    monkeypatch.setattr(server, "_execute", broken)
    await _deliver(server, journal, _body(_call("bug")))
    failure = _failure(_replies(journal)[0])
    assert failure["class"] == "RuntimeError" and "req-bug" in failure["message"]
    assert [k for k, _ in journal.events] == ["publish", "ack"]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "method": st.sampled_from(["select_destinations", "ping", "sync_instance_info"]) | _JSON,
        "version": st.sampled_from(["4.0", "4.5", "1.1", "9.9"]) | _JSON,
        "namespace": st.sampled_from(["baseapi"]) | _JSON,
        "args": st.fixed_dictionaries(
            {}, optional={"spec_obj": st.just(P.request_spec()) | _JSON, "instance_uuids": _JSON}
        )
        | _JSON,
        "_timeout": _JSON,
        "_unique_id": _JSON,
        "_context_request_id": _JSON,
        "_context_roles": _JSON,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_FIELDS)
def test_every_call_with_a_reply_address_gets_exactly_one_final_reply(
    fields: dict[str, Any],
) -> None:
    """Whatever else the message holds, a readable ``_msg_id``/``_reply_q`` gets one answer."""
    journal = Journal()
    server = _server(Scheduler(), Events(), journal)
    inner = {**fields, "_msg_id": "m-fuzz", "_reply_q": "reply_fuzz"}
    asyncio.run(_deliver(server, journal, _body(inner)))
    kinds = [k for k, _ in journal.events]
    assert kinds == ["publish", "ack"], journal.events
    routing_key, reply = journal.events[0][1]
    assert routing_key == "reply_fuzz" and reply["_msg_id"] == "m-fuzz" and reply["ending"]
