"""oslo.messaging's rabbit-driver message format: envelope, inner keys, replies, failures.

Pure functions over bytes and dicts, so every malformed-input class is unit-testable without a
broker. Everything that can go wrong while reading a message raises :class:`MalformedMessage`,
which carries whatever reply address could still be recovered, so a call gets a failure reply
and only a message without one is rejected.
"""

from __future__ import annotations

import json
import math
import re
import uuid
import zlib
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncsched.exceptions import AsyncschedError, NovaException
from asyncsched.objects.codec import decode_context
from asyncsched.objects.models import RequestContext

ENVELOPE_VERSION = "2.0"
VERSION_KEY = "oslo.version"
MESSAGE_KEY = "oslo.message"
CONTENT_TYPE = "application/json"
CONTENT_ENCODING = "utf-8"

DISPATCHER_MODULE = "oslo_messaging.rpc.dispatcher"

# Bounds that keep one message's parse short (issue #21: no input up to max_message_bytes may
# hold the event loop 100 ms). ``json.loads`` holds the GIL, so a thread would not help; its time
# grows with the values in the text and with the digits of its integers (conversion is
# quadratic), so both are bounded before and while parsing. Nova's largest request (10,000
# instance uuids, its RequestSpec) holds about 11,000 values; a compute's update_instance_info
# about 10 per instance; an integer nova sends fits in 64 bits (20 digits).
MAX_VALUES = 50_000
MAX_INT_DIGITS = 100
# What a failure reply or a log line quotes of a reason (a field path can be long).
MAX_REASON = 512

# _msg_id / _reply_q values oslo produces: hex uuids, reply_<hex>, reply_<host>:<proc>:<n>.
_ADDRESS_RE = re.compile(r"^[A-Za-z0-9_.:@\-]{1,255}$")


@dataclass(frozen=True, slots=True)
class ReplyAddress:
    """Where a call's reply goes: the caller's reply queue and the call's id."""

    reply_q: str
    msg_id: str


class MalformedMessage(AsyncschedError):
    """A message we cannot serve. ``address`` is set when a failure reply can still be sent."""

    def __init__(self, reason: str, address: ReplyAddress | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.address = address


@dataclass(frozen=True, slots=True)
class IncomingMessage:
    """The inner message, with oslo's defaults for absent keys."""

    method: str
    args: Mapping[str, Any]
    version: str
    namespace: str | None
    unique_id: str | None
    context: RequestContext
    address: ReplyAddress | None = None  # None for casts
    timeout: float | None = None  # call-monitor seconds (_timeout)
    raw_keys: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_call(self) -> bool:
        return self.address is not None

    @property
    def heartbeat_interval(self) -> float | None:
        """oslo's watchdog: ``int(_timeout)/2`` seconds, none below 1 s or without _timeout."""
        if not self.timeout:
            return None
        interval = int(self.timeout) / 2
        return interval if interval >= 1 else None


def _valid_address_part(value: Any) -> bool:
    return isinstance(value, str) and bool(_ADDRESS_RE.match(value))


def _address_of(inner: Mapping[str, Any]) -> ReplyAddress | None:
    msg_id = inner.get("_msg_id")
    reply_q = inner.get("_reply_q")
    if (
        isinstance(msg_id, str)
        and isinstance(reply_q, str)
        and _valid_address_part(msg_id)
        and _valid_address_part(reply_q)
    ):
        return ReplyAddress(reply_q=reply_q, msg_id=msg_id)
    return None


# Each pattern starts with a literal (the key after its opening quote), which ``re`` finds with
# its fast substring search; what follows is bounded (at most 7 backslashes before a quote: a
# JSON string in JSON in JSON), so every candidate costs a few hundred bytes at most and a scan
# is linear in the body. Unbounded ``\\*`` runs made it quadratic on runs of backslashes
# (issue #21: 40,000 backslashes held the loop 4.6 s).
_SCAN_RE = {
    key: re.compile(
        b'"' + key.encode() + rb'\\{0,7}"[ \t\r\n]{0,8}:[ \t\r\n]{0,8}\\{0,7}"'
        rb"([A-Za-z0-9_.:@\-]{1,255})\\{0,7}\""
    )
    for key in ("_msg_id", "_reply_q")
}


def scan_address(body: bytes) -> ReplyAddress | None:
    """Find ``_msg_id``/``_reply_q`` in a body we will not parse (too big, or not JSON).

    The inner message is a JSON string inside JSON, so the keys appear with escaped quotes;
    the pattern accepts both forms. Only the first hit of each is used. Linear in the body.
    """
    found: dict[str, str] = {}
    for key, pattern in _SCAN_RE.items():
        m = pattern.search(body)
        if m is None:
            return None
        found[key] = m.group(1).decode()
    return ReplyAddress(reply_q=found["_reply_q"], msg_id=found["_msg_id"])


def decompress(body: bytes, compression: str | None, max_bytes: int) -> bytes:
    """kombu_compression: kombu's "gzip" is really a zlib stream. Bounded against zip bombs."""
    if not compression:
        return body
    if compression not in ("application/x-gzip", "application/x-zlib", "zlib", "gzip"):
        raise MalformedMessage(f"unsupported compression {compression!r}", scan_address(body))
    try:
        decomp = zlib.decompressobj(zlib.MAX_WBITS | 32)  # zlib or gzip header
        out = decomp.decompress(body, max_bytes + 1)
    except zlib.error as exc:
        raise MalformedMessage(f"cannot decompress message: {exc}") from None
    if len(out) > max_bytes or decomp.unconsumed_tail:
        raise MalformedMessage(f"message larger than {max_bytes} bytes once decompressed")
    return out


def decode_body(body: bytes, max_bytes: int) -> dict[str, Any]:
    """Outer JSON + oslo envelope -> the inner message dict (oslo's ``deserialize_msg``).

    A dict without both envelope keys is the legacy 1.0 un-enveloped form and is used as is.
    """
    steps = decode_steps(body, max_bytes)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            inner: dict[str, Any] = done.value
            return inner


def decode_steps(body: bytes, max_bytes: int) -> Generator[None, None, dict[str, Any]]:
    """``decode_body`` in steps (count, outer parse, inner parse): it yields between them, so
    a server can give its loop a turn there (``rpc.paced.drive``); returns the inner dict."""
    if len(body) > max_bytes:
        raise MalformedMessage(
            f"message of {len(body)} bytes exceeds max_message_bytes={max_bytes}",
            scan_address(body),
        )
    values = value_bound(body)
    if values > MAX_VALUES:
        raise MalformedMessage(
            f"message holds up to {values} JSON values (at most {MAX_VALUES})", scan_address(body)
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedMessage("body is not valid UTF-8 JSON", scan_address(body)) from None
    yield
    outer = _loads(text, "body is not valid UTF-8 JSON", body)
    if not isinstance(outer, dict):
        raise MalformedMessage(f"body is a JSON {type(outer).__name__}, not an object")
    if VERSION_KEY not in outer or MESSAGE_KEY not in outer:
        return outer
    version = outer[VERSION_KEY]
    if not isinstance(version, str) or not _envelope_compatible(version):
        raise MalformedMessage(
            f"unsupported envelope version {version!r} (we accept {ENVELOPE_VERSION})",
            scan_address(body),
        )
    payload = outer[MESSAGE_KEY]
    if not isinstance(payload, str):
        raise MalformedMessage("oslo.message must be a JSON string", scan_address(body))
    yield
    inner = _loads(payload, "oslo.message is not valid JSON", body)
    if not isinstance(inner, dict):
        raise MalformedMessage("oslo.message is not a JSON object")
    return inner


def value_bound(body: bytes) -> int:
    """No less than the number of JSON values in ``body`` less one: every value but the last
    of a container is followed by a comma, and a container opens with a bracket. Commas inside
    strings count too (an upper bound), and the count runs in C at memory speed."""
    return body.count(b",") + body.count(b"[") + body.count(b"{")


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise MalformedMessage(f"an integer of {len(text)} characters (at most {MAX_INT_DIGITS})")
    return int(text)


def _loads(text: str, invalid: str, body: bytes) -> Any:
    """``json.loads`` with integers bounded; ``invalid`` is the reason for bad JSON."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except MalformedMessage as exc:  # from _parse_int, without the address
        raise MalformedMessage(exc.reason, scan_address(body)) from None
    except (ValueError, RecursionError):
        raise MalformedMessage(invalid, scan_address(body)) from None


def brief(text: str, limit: int = MAX_REASON) -> str:
    """``text`` cut to ``limit`` characters for a reply or a log line."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def _envelope_compatible(version: str) -> bool:
    """oslo's ``version_is_compatible('2.0', received)``: major 2, minor 0."""
    parts = version.split(".")
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        return False
    if not nums or len(nums) > 3:
        return False
    return nums[0] == 2 and (len(nums) < 2 or nums[1] == 0) and (len(nums) < 3 or nums[2] == 0)


def parse_message(inner: Mapping[str, Any]) -> IncomingMessage:
    """Pull oslo's keys out of the inner dict; a malformed call keeps its reply address."""
    address = _address_of(inner)
    if address is None and ("_msg_id" in inner or "_reply_q" in inner):
        # A call whose address is unusable: nothing to reply to.
        raise MalformedMessage("call without a usable _msg_id/_reply_q")
    method = inner.get("method")
    if not isinstance(method, str) or not method:
        raise MalformedMessage("missing or non-string 'method'", address)
    args = inner.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise MalformedMessage("'args' must be an object", address)
    version = inner.get("version")
    if version is None:
        version = "1.0"
    if not isinstance(version, str):
        raise MalformedMessage("'version' must be a string", address)
    namespace = inner.get("namespace")
    if namespace is not None and not isinstance(namespace, str):
        raise MalformedMessage("'namespace' must be a string", address)
    unique_id = inner.get("_unique_id")
    if unique_id is not None and not isinstance(unique_id, str):
        unique_id = str(unique_id)
    try:
        context = decode_context(inner)
    except Exception as exc:  # decode_context tolerates bad values; this is a last guard
        raise MalformedMessage(f"unreadable _context_ keys: {exc}", address) from None
    return IncomingMessage(
        method=method,
        args=args,
        version=version,
        namespace=namespace,
        unique_id=unique_id,
        context=context,
        address=address,
        timeout=_call_timeout(inner.get("_timeout")),
        raw_keys=frozenset(k for k in inner if isinstance(k, str)),
    )


def _call_timeout(raw: Any) -> float | None:
    """``_timeout`` as seconds, or None when it cannot drive heartbeats.

    Only a finite positive number (or numeric string) counts: ``nan``, ``inf`` and ``1e400``
    (which JSON reads as inf) mean "no call monitor", and the call is served without heartbeats.
    """
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        return None
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        return None
    return value if math.isfinite(value) and value > 0 else None


# --------------------------------------------------------------------------------------------
# Outgoing.


@dataclass(frozen=True, slots=True)
class RawJSON:
    """A value already encoded: JSON text in ``parts`` (joined, they are the text).

    A large result is encoded piece by piece with loop turns in between (``rpc.paced``) and
    stays in pieces until the reply's bytes are joined once, so no step copies all of it.
    """

    parts: tuple[str, ...]


def dumps(value: Any) -> str:
    """JSON text as oslo's ``jsonutils.dumps`` would give it for our values."""
    if isinstance(value, RawJSON):
        return "".join(value.parts)
    return json.dumps(value, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def escape(text: str) -> bytes:
    """``json.dumps`` of a string, without its quotes, as (ASCII) bytes.

    Escaping is per code point, so ``escape(a + b) == escape(a) + escape(b)``: a long string
    can be escaped in pieces.
    """
    return json.dumps(text)[1:-1].encode("ascii")


_ENVELOPE_HEAD = json.dumps({VERSION_KEY: ENVELOPE_VERSION, MESSAGE_KEY: ""})[:-2].encode()


def seal(escaped_payload: Sequence[bytes]) -> bytes:
    """``serialize_msg``'s envelope around an inner message already escaped (in pieces)."""
    return b"".join((_ENVELOPE_HEAD, *escaped_payload, b'"}'))


def envelope(inner: Mapping[str, Any]) -> bytes:
    """Wrap an inner message the way ``serialize_msg`` does: ``oslo.message`` is a string."""
    return seal([escape(dumps(dict(inner)))])


def reply_inner(
    msg_id: str, result: Any, failure: str | None, ending: bool, unique_id: str | None = None
) -> tuple[str, ...]:
    """The inner reply message as JSON text in pieces (a :class:`RawJSON` result stays so)."""
    tail = json.dumps(
        {
            "failure": failure,
            "ending": ending,
            "_msg_id": msg_id,
            "_unique_id": unique_id or uuid.uuid4().hex,
        }
    )
    encoded = result.parts if isinstance(result, RawJSON) else (dumps(result),)
    return ('{"result": ', *encoded, ", " + tail[1:])


def reply_body(
    msg_id: str, result: Any, failure: str | None, ending: bool, unique_id: str | None = None
) -> bytes:
    """A whole reply in one go; ``rpc.paced`` builds the same bytes with loop turns."""
    return seal([escape("".join(reply_inner(msg_id, result, failure, ending, unique_id)))])


def heartbeat_body(msg_id: str) -> bytes:
    return reply_body(msg_id, None, None, ending=False)


def failure_payload(
    cls: str, module: str, message: str, kwargs: Mapping[str, Any] | None = None
) -> str:
    """oslo's ``serialize_remote_exception`` shape, with an empty traceback (never leaked)."""
    return json.dumps(
        {
            "class": cls,
            "module": module,
            "message": message,
            "tb": [],
            "args": [message],
            "kwargs": dict(kwargs or {}),
        },
        default=str,
    )


def nova_failure(exc: NovaException) -> str:
    """A NovaException as nova sends it, so a conductor re-raises its own class."""
    return failure_payload(type(exc).__name__, "nova.exception", exc.message, exc.kwargs)


def no_such_method(method: str) -> str:
    return failure_payload(
        "NoSuchMethod", DISPATCHER_MODULE, f"Endpoint does not support RPC method {method}"
    )


def unsupported_version(version: str, method: str) -> str:
    return failure_payload(
        "UnsupportedVersion",
        DISPATCHER_MODULE,
        f"Endpoint does not support RPC version {version}. Attempted method: {method}",
    )


def malformed_failure(reason: str) -> str:
    """Bad input: a builtins ValueError, which every oslo caller may re-raise as is."""
    return failure_payload("ValueError", "builtins", f"Malformed request: {brief(reason)}")


def internal_failure(request_id: str | None) -> str:
    """Our own bug: a generic message; the details stay in our log, never on the wire."""
    rid = f" (request {request_id})" if request_id else ""
    return failure_payload(
        "RuntimeError",
        "builtins",
        f"asyncsched failed to handle the request{rid}; see the scheduler log",
    )
