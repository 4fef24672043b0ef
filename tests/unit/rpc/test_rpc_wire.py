"""The oslo envelope, inner keys, replies and failure payloads, byte for byte."""

from __future__ import annotations

import json
import zlib
from typing import Any

import pytest

from asyncsched.exceptions import AllocationUpdateFailed, NoValidHost
from asyncsched.rpc import wire
from asyncsched.rpc.wire import MalformedMessage, ReplyAddress
from tests.support.reference import SAMPLES

MAX = 1 << 20


def _env(inner: Any) -> bytes:
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)}).encode()


def _call(**extra: Any) -> dict[str, Any]:
    inner = {
        "method": "select_destinations",
        "args": {"instance_uuids": ["u1"]},
        "version": "4.5",
        "_msg_id": "e478c4b1af344284bc22190e8abc9c2e",
        "_reply_q": "reply_885c53b1e4f14178be225d79065ce20d",
        "_timeout": 60,
        "_unique_id": "43eaf2dcd31447b79f6152548b8d1dcf",
        "_context_request_id": "req-1",
    }
    inner.update(extra)
    return inner


def test_captured_nova_call_decodes() -> None:
    sample = json.loads((SAMPLES / "nova_call.json").read_text())
    msg = wire.parse_message(wire.decode_body(sample["raw_body"].encode(), MAX))
    assert msg.method == "select_destinations" and msg.version == "4.5"
    assert msg.namespace is None
    assert msg.is_call and msg.address is not None
    assert msg.address.reply_q.startswith("reply_")
    assert msg.heartbeat_interval == 30.0
    assert msg.context.request_id == "req-6886ba71-c387-554e-978f-fa0cccdd7c36"
    assert "spec_obj" in msg.args


def test_envelope_and_legacy_unenveloped_forms() -> None:
    inner = _call()
    assert wire.decode_body(_env(inner), MAX) == inner
    assert wire.decode_body(json.dumps(inner).encode(), MAX) == inner  # 1.0: no envelope


def test_cast_has_no_address_and_defaults() -> None:
    msg = wire.parse_message({"method": "sync_instance_info", "_unique_id": "x"})
    assert not msg.is_call and msg.address is None
    assert msg.version == "1.0" and msg.args == {} and msg.heartbeat_interval is None


def test_heartbeat_interval_follows_oslo_watchdog() -> None:
    assert wire.parse_message(_call(_timeout=2)).heartbeat_interval == 1.0
    assert wire.parse_message(_call(_timeout=1)).heartbeat_interval is None  # < 1 s: none
    assert wire.parse_message(_call(_timeout=None)).heartbeat_interval is None
    assert wire.parse_message(_call(_timeout="bogus")).heartbeat_interval is None


@pytest.mark.parametrize(
    "raw",
    [float("nan"), float("inf"), float("-inf"), "nan", "inf", "1e400", 10**400, -5, 0, True, []],
)
def test_a_timeout_that_cannot_drive_heartbeats_means_none(raw: Any) -> None:
    msg = wire.parse_message(_call(_timeout=raw))
    assert msg.timeout is None and msg.heartbeat_interval is None


def test_nan_inf_and_1e400_in_the_json_body_parse() -> None:
    for literal in ("NaN", "Infinity", "1e400"):
        body = json.dumps(_call()).replace('"_timeout": 60', f'"_timeout": {literal}').encode()
        msg = wire.parse_message(wire.decode_body(body, MAX))
        assert msg.timeout is None and msg.is_call
    assert wire.parse_message(_call(_timeout=1e300)).heartbeat_interval == int(1e300) / 2


@pytest.mark.parametrize(
    ("body", "has_address"),
    [
        (b"\xff\xfe not utf8", False),
        (b"{not json", False),
        (b"[1, 2, 3]", False),
        (json.dumps({"oslo.version": "3.0", "oslo.message": "{}"}).encode(), False),
        (json.dumps({"oslo.version": "2.1", "oslo.message": json.dumps(_call())}).encode(), True),
        (json.dumps({"oslo.version": "2.0", "oslo.message": _call()}).encode(), True),
        (json.dumps({"oslo.version": "2.0", "oslo.message": "{broken"}).encode(), False),
        (json.dumps({"oslo.version": "2.0", "oslo.message": "[]"}).encode(), False),
    ],
)
def test_undecodable_bodies(body: bytes, has_address: bool) -> None:
    with pytest.raises(MalformedMessage) as info:
        wire.decode_body(body, MAX)
    assert (info.value.address is not None) is has_address


def test_broken_json_with_visible_address_still_gets_a_reply() -> None:
    body = _env(_call())[:-5] + b"garbage"
    with pytest.raises(MalformedMessage) as info:
        wire.decode_body(body, MAX)
    assert info.value.address == ReplyAddress(
        reply_q="reply_885c53b1e4f14178be225d79065ce20d", msg_id="e478c4b1af344284bc22190e8abc9c2e"
    )


def test_oversized_message_is_refused_without_parsing_but_keeps_address() -> None:
    body = _env(_call(args={"blob": "x" * 5000}))
    with pytest.raises(MalformedMessage, match="exceeds max_message_bytes") as info:
        wire.decode_body(body, 2048)
    assert info.value.address is not None
    assert info.value.address.msg_id == "e478c4b1af344284bc22190e8abc9c2e"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"method": None}, "method"),
        ({"method": 5}, "method"),
        ({"args": [1]}, "args"),
        ({"version": 4.5}, "version"),
        ({"namespace": ["x"]}, "namespace"),
    ],
)
def test_bad_inner_keys_keep_the_reply_address(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(MalformedMessage, match=reason) as info:
        wire.parse_message(_call(**change))
    assert info.value.address is not None


def test_unusable_reply_address_is_not_answered() -> None:
    with pytest.raises(MalformedMessage) as info:
        wire.parse_message(_call(_reply_q={"x": 1}))
    assert info.value.address is None
    with pytest.raises(MalformedMessage):
        wire.parse_message(_call(_reply_q="amq.gen/../../evil queue"))


def test_kombu_compression_and_zip_bombs() -> None:
    body = _env(_call())
    assert wire.decompress(zlib.compress(body), "application/x-gzip", MAX) == body
    bomb = zlib.compress(b"{" + b" " * (4 * MAX))
    with pytest.raises(MalformedMessage, match="decompressed"):
        wire.decompress(bomb, "application/x-gzip", MAX)
    with pytest.raises(MalformedMessage):
        wire.decompress(b"not zlib", "application/x-gzip", MAX)
    with pytest.raises(MalformedMessage, match="unsupported compression"):
        wire.decompress(body, "application/x-bzip2", MAX)


def _unwrap_reply(body: bytes) -> dict[str, Any]:
    outer = json.loads(body)
    assert set(outer) == {"oslo.version", "oslo.message"} and outer["oslo.version"] == "2.0"
    assert isinstance(outer["oslo.message"], str)  # double encoded, as oslo requires
    inner: dict[str, Any] = json.loads(outer["oslo.message"])
    return inner


def test_reply_and_heartbeat_bodies() -> None:
    reply = _unwrap_reply(wire.reply_body("m1", [[{"a": 1}]], None, ending=True))
    assert reply["result"] == [[{"a": 1}]] and reply["failure"] is None
    assert reply["ending"] is True and reply["_msg_id"] == "m1"
    assert len(reply["_unique_id"]) == 32
    beat = _unwrap_reply(wire.heartbeat_body("m1"))
    assert beat == {
        "result": None,
        "failure": None,
        "ending": False,
        "_msg_id": "m1",
        "_unique_id": beat["_unique_id"],
    }


def test_no_valid_host_failure_matches_nova() -> None:
    failure = json.loads(wire.nova_failure(NoValidHost(reason="example: no host has 128 VCPU")))
    assert failure == {
        "class": "NoValidHost",
        "module": "nova.exception",
        "message": "No valid host was found. example: no host has 128 VCPU",
        "tb": [],
        "args": ["No valid host was found. example: no host has 128 VCPU"],
        "kwargs": {"reason": "example: no host has 128 VCPU", "code": 500},
    }
    empty = json.loads(wire.nova_failure(NoValidHost()))
    assert empty["args"] == ["No valid host was found. "]
    assert empty["kwargs"] == {"reason": "", "code": 500}


def test_other_nova_exceptions_travel_by_name() -> None:
    failure = json.loads(
        wire.nova_failure(AllocationUpdateFailed(consumer_uuid="c1", error="conflict"))
    )
    assert failure["class"] == "AllocationUpdateFailed"
    assert failure["module"] == "nova.exception"
    assert "c1" in failure["message"] and failure["kwargs"]["consumer_uuid"] == "c1"


def test_dispatcher_failures_match_oslo_text() -> None:
    nsm = json.loads(wire.no_such_method("frobnicate"))
    assert nsm["class"] == "NoSuchMethod" and nsm["module"] == "oslo_messaging.rpc.dispatcher"
    assert nsm["message"] == "Endpoint does not support RPC method frobnicate"
    uv = json.loads(wire.unsupported_version("5.0", "select_destinations"))
    assert uv["class"] == "UnsupportedVersion"
    assert uv["message"] == (
        "Endpoint does not support RPC version 5.0. Attempted method: select_destinations"
    )
    assert uv["args"] == [uv["message"]] and uv["kwargs"] == {}


def test_internal_failure_leaks_nothing() -> None:
    failure = json.loads(wire.internal_failure("req-9"))
    assert failure["tb"] == [] and failure["module"] == "builtins"
    assert "req-9" in failure["message"]
    assert set(failure) == {"class", "module", "message", "tb", "args", "kwargs"}
