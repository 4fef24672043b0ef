"""RPCServer message handling without a broker: a fake channel records publishes and acks.

The wire against the real RabbitMQ and oslo client is in tests/integration/rpc; here the
ordering guarantees (reply before ack, one scheduling per _unique_id) and every malformed-input
path are checked deterministically.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, cast

import pytest
from aio_pika.abc import AbstractIncomingMessage

from asyncsched.conf.options import DefaultOptions
from asyncsched.logs import RequestIds, current_request_ids
from asyncsched.objects import codec
from asyncsched.rpc import wire
from tests.support import nova_objects
from tests.support import nova_primitives as P
from tests.support.recorder import RecordingRecorder
from tests.support.rpc_fakes import (
    I1,
    I2,
    Events,
    FakeMessage,
    Journal,
    Scheduler,
    _body,
    _call,
    _deliver,
    _replies,
    _server,
)


@pytest.fixture
def parts() -> tuple[Scheduler, Events, Journal]:
    return Scheduler(), Events(), Journal()


async def test_call_replied_then_acked(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    await _deliver(server, journal, _body(_call()))
    assert [k for k, _ in journal.events] == ["publish", "ack"]
    routing_key, reply = journal.events[0][1]
    assert routing_key == "reply_q1"
    assert reply["ending"] is True and reply["failure"] is None and reply["_msg_id"] == "m-u-1"
    per_instance = reply["result"]
    assert len(per_instance) == 2 and len(per_instance[0]) == 2
    assert codec.decode_selection(per_instance[0][1]).service_host == "cn-2"
    spec, uuids, objects, alternates = scheduler.calls[0]
    assert spec.num_instances == 3 and uuids == [I1, I2] and objects and alternates
    assert scheduler.contexts[0].request_id == "req-u-1"
    # Everything logged while the request runs carries its id (asyncsched.logs).
    assert scheduler.log_ids == [RequestIds("req-u-1", None)]
    assert current_request_ids() is None


async def test_legacy_call_gets_plain_dicts(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    inner = _call()
    inner["version"] = "4.0"
    inner["args"] = {
        "request_spec": {
            "instance_type": {"memory_mb": 512, "vcpus": 1},
            "instance_properties": {"project_id": "p"},
            "num_instances": 1,
        },
        "filter_properties": {"scheduler_hints": {}},
    }
    await _deliver(server, journal, _body(inner))
    reply = _replies(journal)[0]
    assert reply["result"] == [{"host": "cn-1", "nodename": "cn-1", "limits": {}}]
    assert scheduler.calls[0][1] is None and scheduler.calls[0][2] is False


async def test_redelivered_call_answered_from_cache(
    parts: tuple[Scheduler, Events, Journal],
) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    await _deliver(server, journal, _body(_call("dup")))
    await _deliver(server, journal, _body(_call("dup")))
    assert len(scheduler.calls) == 1
    first, second = _replies(journal)
    assert first["result"] == second["result"] and first["_msg_id"] == second["_msg_id"]
    assert [k for k, _ in journal.events] == ["publish", "ack", "publish", "ack"]
    assert server.stats.duplicates == 1


async def test_redelivery_while_running_waits_for_the_run(
    parts: tuple[Scheduler, Events, Journal],
) -> None:
    _, events, journal = parts
    scheduler = Scheduler(delay=0.05)
    server = _server(scheduler, events, journal)
    await asyncio.gather(
        _deliver(server, journal, _body(_call("x"))),
        _deliver(server, journal, _body(_call("x"))),
    )
    assert len(scheduler.calls) == 1
    assert len(_replies(journal)) == 2
    assert [k for k, _ in journal.events].count("ack") == 2


async def test_cache_is_bounded(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal, reply_cache_size=2)
    for uid in ("a", "b", "c", "a"):
        await _deliver(server, journal, _body(_call(uid)))
    assert len(scheduler.calls) == 4  # "a" fell out of the 2-entry cache


async def test_a_flood_of_casts_does_not_evict_a_calls_entry(
    parts: tuple[Scheduler, Events, Journal],
) -> None:
    """Issue #21 item 9: casts keep their own duplicate detection, apart from calls'."""
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal, reply_cache_size=3)
    await _deliver(server, journal, _body(_call("kept")))
    for i in range(10):  # more casts than the cache holds
        sync = {"host_name": f"cn-{i}", "instance_uuids": [I1]}
        inner = {"method": "sync_instance_info", "version": "4.2", "args": sync}
        await _deliver(server, journal, _body({**inner, "_unique_id": f"cast-{i}"}))
    await _deliver(server, journal, _body(_call("kept")), redelivered=True)
    assert len(scheduler.calls) == 1 and server.stats.duplicates == 1
    # A redelivered cast is still recognised (and not applied twice).
    last = {"host_name": "cn-9", "instance_uuids": [I1]}
    inner = {"method": "sync_instance_info", "version": "4.2", "args": last}
    await _deliver(server, journal, _body({**inner, "_unique_id": "cast-9"}), redelivered=True)
    assert len(events.seen) == 10 and server.stats.duplicates == 2


async def test_no_valid_host_and_internal_errors(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    await _deliver(
        server, journal, _body(_call("n", spec_obj=P.request_spec(flavor=P.flavor(vcpus=128))))
    )
    await _deliver(
        server, journal, _body(_call("e", spec_obj=P.request_spec(flavor=P.flavor(vcpus=13))))
    )
    nvh, internal = _replies(journal)
    failure = json.loads(nvh["failure"])
    assert failure["class"] == "NoValidHost" and failure["module"] == "nova.exception"
    assert failure["kwargs"] == {"reason": "no host has that many VCPU", "code": 500}
    assert nvh["result"] is None and nvh["ending"] is True
    assert "hunter2" not in internal["failure"] and "SECRET" not in internal["failure"]
    assert json.loads(internal["failure"])["tb"] == []


@pytest.mark.parametrize(
    ("inner_change", "expect"),
    [
        ({"version": "4.6"}, "UnsupportedVersion"),
        ({"version": "5.0"}, "UnsupportedVersion"),
        ({"method": "frobnicate"}, "NoSuchMethod"),
        ({"args": {"spec_obj": {"nova_object.name": "Bogus"}}}, "ValueError"),
        ({"args": {"spec_obj": P.request_spec(), "instance_uuids": "i-1"}}, "ValueError"),
        ({"args": {"spec_obj": P.request_spec(), "return_objects": "yes"}}, "ValueError"),
        ({"args": {}}, "ValueError"),
        ({"args": [1, 2]}, "ValueError"),
        ({"method": None}, "ValueError"),
    ],
)
async def test_bad_calls_get_a_failure_and_the_consumer_goes_on(
    parts: tuple[Scheduler, Events, Journal], inner_change: dict[str, Any], expect: str
) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    inner = _call("bad")
    inner.update(inner_change)
    await _deliver(server, journal, _body(inner))
    await _deliver(server, journal, _body(_call("good")))
    bad, good = _replies(journal)
    assert json.loads(bad["failure"])["class"] == expect
    assert bad["ending"] is True and bad["_msg_id"] == "m-bad"
    assert good["failure"] is None
    assert [k for k, _ in journal.events] == ["publish", "ack", "publish", "ack"]


async def test_oversized_call_answered_without_parsing(
    parts: tuple[Scheduler, Events, Journal],
) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal, max_message_bytes=4096)
    await _deliver(server, journal, _body(_call("big", padding="x" * 10000)))
    (reply,) = _replies(journal)
    assert "max_message_bytes" in json.loads(reply["failure"])["message"]
    assert scheduler.calls == []


async def test_unparseable_without_address_is_rejected(
    parts: tuple[Scheduler, Events, Journal],
) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    await _deliver(server, journal, b"\x00\x01 not json at all")
    await _deliver(server, journal, _body({"no": "method", "_unique_id": "c"}))
    assert journal.events == [("reject", False), ("reject", False)]
    assert server.stats.malformed == 2


async def test_casts_feed_events_and_never_reply(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)

    def cast(method: str, version: str, **args: Any) -> bytes:
        return _body({"method": method, "version": version, "args": args, "_unique_id": method})

    await _deliver(server, journal, cast("update_aggregates", "4.1", aggregates=[P.aggregate()]))
    await _deliver(server, journal, cast("delete_aggregate", "4.1", aggregate=P.aggregate()))
    await _deliver(
        server,
        journal,
        cast(
            "update_instance_info",
            "4.2",
            host_name="cn-1",
            instance_info=nova_objects.encode_instance_list(["i-1"]),
        ),
    )
    await _deliver(
        server, journal, cast("delete_instance_info", "4.2", host_name="cn-1", instance_uuid="i-1")
    )
    await _deliver(
        server, journal, cast("sync_instance_info", "4.2", host_name="cn-1", instance_uuids=["a"])
    )
    # Malformed casts: logged and dropped, the next one is still served.
    await _deliver(server, journal, cast("sync_instance_info", "4.2", host_name=5))
    await _deliver(server, journal, cast("delete_aggregate", "4.1"))
    await _deliver(server, journal, cast("nope", "4.2"))
    assert [name for name, _ in events.seen] == [
        "update_aggregates",
        "delete_aggregate",
        "update_instance_info",
        "delete_instance_info",
        "sync_instance_info",
    ]
    assert events.seen[2][1] == ("cn-1", ("i-1",))
    assert all(kind == "ack" for kind, _ in journal.events)
    assert len(journal.events) == 8


async def test_ping(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    inner = _call("p")
    inner.update(method="ping", namespace="baseapi", version="1.1", args={"arg": {"k": 1}})
    await _deliver(server, journal, _body(inner))
    assert _replies(journal)[0]["result"] == {"service": "scheduler", "arg": {"k": 1}}


def test_tls_from_config_and_url() -> None:
    import ssl

    from asyncsched.conf.options import OsloMessagingRabbitOptions
    from asyncsched.conf.transport_url import parse_transport_url
    from asyncsched.rpc.broker import ssl_context

    rabbit = OsloMessagingRabbitOptions()
    plain = parse_transport_url(DefaultOptions().transport_url)
    assert ssl_context(rabbit, plain) is None
    # ?ssl=1 in transport_url without a CA: encrypted, broker not verified (as kombu does).
    ctx = ssl_context(rabbit, parse_transport_url("rabbit://u:p@h:5671/?ssl=1"))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE
    verified = replace(rabbit, ssl=True, ssl_ca_file="/etc/ssl/certs/ca-certificates.crt")
    ctx = ssl_context(verified, plain)
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED


async def test_casts_are_applied_in_arrival_order(parts: tuple[Scheduler, Events, Journal]) -> None:
    scheduler, _, journal = parts

    class SlowFirst(Events):
        async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
            await asyncio.sleep(0.05)
            await super().update_instance_info(host_name, instance_uuids)

    events = SlowFirst()
    server = _server(scheduler, events, journal)
    decl = server.topology.queues[2]
    bodies = [
        _body(
            {
                "method": "update_instance_info",
                "version": "4.2",
                "args": {
                    "host_name": "cn-1",
                    "instance_info": nova_objects.encode_instance_list(["i"]),
                },
                "_unique_id": "c1",
            }
        ),
        _body(
            {
                "method": "delete_instance_info",
                "version": "4.2",
                "args": {"host_name": "cn-1", "instance_uuid": "i"},
                "_unique_id": "c2",
            }
        ),
    ]
    for body in bodies:
        await server._on_message(decl, cast(AbstractIncomingMessage, FakeMessage(journal, body)))
    await asyncio.gather(*server._tasks)
    assert [name for name, _ in events.seen] == ["update_instance_info", "delete_instance_info"]


async def test_unserialisable_result_still_gets_a_reply(
    parts: tuple[Scheduler, Events, Journal], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A result the encoder refuses (e.g. nested past the recursion limit) -> a failure reply."""
    scheduler, events, journal = parts
    server = _server(scheduler, events, journal)
    real = wire.dumps

    def picky(value: Any) -> str:
        if value is not None:
            raise RecursionError("maximum recursion depth exceeded while encoding")
        return real(value)

    monkeypatch.setattr(wire, "dumps", picky)
    inner = _call("deep")
    inner.update(method="ping", namespace="baseapi", version="1.1", args={"arg": 1})
    await _deliver(server, journal, _body(inner))
    (reply,) = _replies(journal)
    assert reply["ending"] is True and reply["_msg_id"] == "m-deep"
    assert json.loads(reply["failure"])["class"] == "RuntimeError"
    assert journal.events[-1] == ("ack", None)


async def test_calls_are_recorded_by_outcome_and_redeliveries_counted(
    parts: tuple[Scheduler, Events, Journal],
) -> None:
    scheduler, events, journal = parts
    rec = RecordingRecorder()
    server = _server(scheduler, events, journal, rec)
    await _deliver(server, journal, _body(_call("ok")))
    await _deliver(server, journal, _body(_call("ok")), redelivered=True)  # from the cache
    await _deliver(
        server, journal, _body(_call("n", spec_obj=P.request_spec(flavor=P.flavor(vcpus=128))))
    )
    await _deliver(
        server, journal, _body(_call("e", spec_obj=P.request_spec(flavor=P.flavor(vcpus=13))))
    )
    await _deliver(server, journal, _body({**_call("m"), "method": "frobnicate"}))
    ping = {**_call("p"), "method": "ping", "namespace": "baseapi", "version": "1.1"}
    await _deliver(server, journal, _body({**ping, "args": {"arg": 1}}))
    # Answered anew only; an unknown method (the caller's text) is never a label.
    assert [c[:2] for c in rec.named("rpc_call")] == [
        ("select_destinations", "ok"),
        ("select_destinations", "no_valid_host"),
        ("select_destinations", "error"),
        ("ping", "ok"),
    ]
    assert all(c[2] >= 0 for c in rec.named("rpc_call"))
    assert [c[0] for c in rec.named("phase")] == ["reply"] * 3
    assert server.stats.redelivered == 1 and server.stats.duplicates == 1
