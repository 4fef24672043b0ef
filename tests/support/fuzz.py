"""Hostile messages for the fuzz test and ``make fuzz``: mutations of nova's captured traffic.

The seeds are what nova 34 really published (``shared/reference/samples``): the conductor's
``select_destinations`` call, the RequestSpec primitive, the fanout casts, plus one boot of our
own cloud's AZ so some mutants still get scheduled. A mutation replaces, deletes, stringifies
or adds a value anywhere in the decoded oslo message, or breaks the envelope itself. ``Wire``
publishes raw bytes with aio-pika (oslo's client cannot send what oslo would refuse to build)
and collects the replies by ``_msg_id`` from a reply queue of its own, in the background, so
a run keeps many calls in flight instead of waiting batch by batch.
"""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aio_pika
from hypothesis import strategies as st

from tests.support.reference import SAMPLES

Path_ = tuple[str | int, ...]


def _load(name: str) -> Any:
    return json.loads((SAMPLES / name).read_text())


def seeds(own_call: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(calls, casts): decoded oslo messages to mutate."""
    call = _load("nova_call.json")["oslo.message (decoded)"]
    spec = _load("request_spec.json")
    with_spec = copy.deepcopy(call)
    with_spec["args"]["spec_obj"] = spec["spec_obj"]
    with_spec["args"]["instance_uuids"] = spec["instance_uuids"]
    casts = [m["oslo.message (decoded)"] for m in _load("fanout_casts.json")["messages"]]
    return [call, with_spec, dict(own_call)], casts


def paths(value: Any, prefix: Path_ = ()) -> Iterator[Path_]:
    """Every key/index path below the root of a JSON value."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield (*prefix, k)
            yield from paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield (*prefix, i)
            yield from paths(v, (*prefix, i))


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, 10**9]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["", "nova_object.data", "4.5", "select_destinations", "\u0000", "é" * 100]),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=10,
)


@dataclass(frozen=True, slots=True)
class Mutation:
    op: str  # replace / delete / stringify / add_key / grow
    where: int  # index into the seed's path list (modulo its length)
    value: Any = None


mutations = st.builds(
    Mutation,
    op=st.sampled_from(["replace", "replace", "delete", "stringify", "add_key", "grow"]),
    where=st.integers(min_value=0, max_value=10**6),
    value=json_value,
)

ENVELOPE_BREAKS = ("not_json", "inner_not_json", "version", "no_message", "truncate", "bad_utf8")


@dataclass(frozen=True, slots=True)
class Mutant:
    """One message to publish. ``msg_id`` is None when no reply can be expected."""

    body: bytes
    msg_id: str | None
    cast: bool


def apply(message: dict[str, Any], mutation: Mutation) -> dict[str, Any]:
    out = copy.deepcopy(message)
    all_paths = list(paths(out))
    path = all_paths[mutation.where % len(all_paths)]
    parent: Any = out
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if mutation.op == "replace":
        parent[last] = mutation.value
    elif mutation.op == "delete":
        del parent[last]
    elif mutation.op == "stringify":
        parent[last] = json.dumps(parent[last], allow_nan=True)
    elif mutation.op == "add_key" and isinstance(parent[last], dict):
        parent[last][str(mutation.value)[:20]] = mutation.value
    elif mutation.op == "grow" and isinstance(parent[last], list | str):
        # Bigger, not broker-sized: RabbitMQ closes a publisher's channel over its
        # max_message_size (16 MiB), which would test the broker, not the daemon.
        if len(json.dumps(parent[last], allow_nan=True)) < 20_000:
            parent[last] = parent[last] * 50
    return out


def build(
    seed: dict[str, Any],
    muts: Sequence[Mutation],
    reply_q: str,
    envelope: str | None,
    cast: bool,
) -> Mutant:
    """Fresh ids, then the mutations, then (maybe) an envelope break."""
    message = copy.deepcopy(seed)
    msg_id = uuid.uuid4().hex
    message["_unique_id"] = uuid.uuid4().hex
    if not cast:
        message["_msg_id"], message["_reply_q"] = msg_id, reply_q
    args = message.get("args")
    if isinstance(args, dict) and isinstance(args.get("instance_uuids"), list):
        # New instances every time, as nova sends them: no mutant trips on another's claim.
        args["instance_uuids"] = [str(uuid.uuid4()) for _ in args["instance_uuids"]]
    for m in muts:
        message = apply(message, m)
    answerable = (
        not cast
        and envelope is None
        and message.get("_msg_id") == msg_id
        and message.get("_reply_q") == reply_q
    )
    inner = json.dumps(message, allow_nan=True)
    env: dict[str, Any] = {"oslo.version": "2.0", "oslo.message": inner}
    body = json.dumps(env).encode()
    if envelope == "not_json":
        body = b"{oslo" + body[:20]
    elif envelope == "inner_not_json":
        body = json.dumps({"oslo.version": "2.0", "oslo.message": inner[:-3]}).encode()
    elif envelope == "version":
        body = json.dumps({"oslo.version": "3.0", "oslo.message": inner}).encode()
    elif envelope == "no_message":
        body = json.dumps({"oslo.version": "2.0"}).encode()
    elif envelope == "truncate":
        body = body[: len(body) // 2]
    elif envelope == "bad_utf8":
        body = body[:30] + b"\xff\xfe" + body[30:]
    return Mutant(body, msg_id if answerable else None, cast)


class Wire:
    """aio-pika on a loop thread of its own, so synchronous hypothesis tests can drive it."""

    def __init__(self, amqp_url: str, exchange: str = "nova") -> None:
        self._url = amqp_url
        self._exchange_name = exchange
        self.reply_q = f"reply_{uuid.uuid4().hex}"
        #: answerable calls published and not answered yet: msg_id -> body (to reproduce)
        self.pending: dict[str, bytes] = {}
        self.expected = 0
        self.answered: Counter[str] = Counter()  # result / failure
        self.done: set[str] = set()
        self.failures: dict[str, str] = {}  # msg_id -> the failure payload of its reply
        self.duplicates = 0  # a second final reply to one of our calls
        self.others = 0  # a reply to an id we did not send (the mutant changed _msg_id)
        self._lock = threading.Condition()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._conn: Any = None

    def __enter__(self) -> Wire:
        self._thread.start()
        self._run(self._open())
        return self

    def __exit__(self, *exc: object) -> None:
        self._run(self._conn.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self, coro: Any, timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _open(self) -> None:
        self._conn = await aio_pika.connect(self._url)
        channel = await self._conn.channel()
        queue = await channel.declare_queue(self.reply_q, exclusive=True)
        self._calls = await channel.get_exchange(self._exchange_name)
        self._fanout = await channel.get_exchange("scheduler_fanout")
        await queue.consume(self._on_reply, no_ack=True)

    async def _on_reply(self, message: aio_pika.abc.AbstractIncomingMessage) -> None:
        try:
            reply = json.loads(json.loads(message.body)["oslo.message"])
        except (ValueError, KeyError, TypeError):
            return  # not a reply of ours to count
        if reply.get("ending") or reply.get("failure"):
            with self._lock:
                msg_id = str(reply.get("_msg_id"))
                if msg_id in self.pending:
                    del self.pending[msg_id]
                    self.done.add(msg_id)
                    self.answered["failure" if reply.get("failure") else "result"] += 1
                    if reply.get("failure"):
                        self.failures[msg_id] = str(reply["failure"])
                elif msg_id in self.done:
                    self.duplicates += 1
                else:
                    self.others += 1
                self._lock.notify_all()

    async def _publish(self, mutants: Sequence[Mutant]) -> None:
        for m in mutants:
            if m.msg_id is not None:
                with self._lock:
                    self.pending[m.msg_id] = m.body
                    self.expected += 1
            target, key = (self._fanout, "") if m.cast else (self._calls, "scheduler")
            await target.publish(aio_pika.Message(m.body), routing_key=key)

    def publish(self, mutants: Sequence[Mutant]) -> None:
        """Publish every mutant; replies are collected in the background."""
        self._run(self._publish(mutants))

    def wait_below(self, limit: int, timeout: float) -> int:
        """Block until at most ``limit`` calls are outstanding (or ``timeout``): how many are."""
        with self._lock:
            self._lock.wait_for(lambda: len(self.pending) <= limit, timeout)
            return len(self.pending)


# --------------------------------------------------------------------------------------------
# The hostile corpus (issue #21): the cases the issue found and their kin, at any size.


@dataclass(frozen=True, slots=True)
class Case:
    """One hostile message: ``msg_id`` is set when a failure reply must come back."""

    name: str
    body: bytes
    msg_id: str | None
    cast: bool = False


class LagWatch:
    """The daemon's own loop-lag samples (its ``looplag`` component, read from the health file
    it rewrites every ``refresh_interval``), polled every 10 ms by a thread. ``since(mark)``:
    the longest hold seen after ``mark()`` (a new ``max_s`` counts too, so a sample the file
    skipped is not missed)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._samples: list[tuple[float, float]] = []  # (last_s, max_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> LagWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            try:
                lag = json.loads(self._path.read_text())["components"]["looplag"]
                sample = (float(lag["last_s"]), float(lag["max_s"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if not self._samples or self._samples[-1] != sample:
                self._samples.append(sample)

    def mark(self) -> tuple[int, float]:
        n = len(self._samples)
        return n, self._samples[-1][1] if n else 0.0

    def since(self, mark: tuple[int, float]) -> float:
        start, max_before = mark
        seen = self._samples[start:]
        worst = max((last for last, _ in seen), default=0.0)
        max_after = seen[-1][1] if seen else max_before
        return max(worst, max_after if max_after > max_before else 0.0)


def _addressed(reply_q: str, msg_id: str) -> dict[str, Any]:
    return {
        "_msg_id": msg_id,
        "_reply_q": reply_q,
        "_unique_id": uuid.uuid4().hex,
        "method": "select_destinations",
        "version": "4.5",
        "_timeout": 60,
    }


def _enveloped(inner_text: str) -> bytes:
    return json.dumps({"oslo.version": "2.0", "oslo.message": inner_text}).encode()


def _head(reply_q: str, msg_id: str) -> str:
    """The JSON text of an addressed call up to an open ``"x": `` value (to be completed)."""
    return json.dumps(_addressed(reply_q, msg_id))[:-1] + ', "x": '


def _nested_envelopes(reply_q: str, msg_id: str, size: int) -> str:
    """An envelope inside the oslo.message of an envelope ..., each level addressed, until
    the escaping (which doubles the backslashes per level) fills ``size``."""
    text = json.dumps(_addressed(reply_q, msg_id))
    while len(text) * 2 < size:
        text = json.dumps(
            {**_addressed(reply_q, msg_id), "oslo.version": "2.0", "oslo.message": text}
        )
    return text


def hostile_corpus(size: int, reply_q: str, benign: Callable[[str], bytes]) -> list[Case]:
    """Every case at about ``size`` bytes; ``benign(msg_id)`` is the ordinary call they are
    measured against (see the corpus test). Calls carry the address (a failure reply must
    come back); the cast's rejection is logged."""
    ids = iter(f"hostile-{uuid.uuid4().hex}-{i}" for i in range(1000))
    cases: list[Case] = []

    def call(name: str, text: str | bytes, *, envelope: bool = True, msg_id: str) -> None:
        if isinstance(text, bytes):
            cases.append(Case(name, text, msg_id))
        else:
            cases.append(Case(name, _enveloped(text) if envelope else text.encode(), msg_id))

    n = size
    m = next(ids)
    call("backslash run (raw)", _head(reply_q, m) + '"' + "\\" * n, envelope=False, msg_id=m)
    m = next(ids)
    call("backslash run (in envelope)", _head(reply_q, m) + '"' + "\\" * (n // 2), msg_id=m)
    m = next(ids)
    call("quote run", _head(reply_q, m) + '"' * n, envelope=False, msg_id=m)
    m = next(ids)
    call("escaped quote run", _head(reply_q, m) + '"' + '\\"' * (n // 4), msg_id=m)
    m = next(ids)
    call("deep nesting", _head(reply_q, m) + "[" * (n // 2) + "]" * (n // 2) + "}", msg_id=m)
    m = next(ids)
    wide = ", ".join(f'"k{i}": 0' for i in range(n // 14))  # escaped: about n bytes
    call("wide object", _head(reply_q, m) + "{" + wide + "}}", msg_id=m)
    m = next(ids)
    call("long string", _head(reply_q, m) + '"' + "a" * (n // 2) + '"}', msg_id=m)
    m = next(ids)
    call("many commas in a string", _head(reply_q, m) + '"' + "," * (n // 2) + '"}', msg_id=m)
    m = next(ids)
    call("lone surrogates", _head(reply_q, m) + '"' + "\\ud800" * (n // 12) + '"}', msg_id=m)
    m = next(ids)
    short = json.dumps("\ud800" * 64)  # many strings, each within validation.MAX_STRING
    call(
        "lone surrogates, many strings",
        _head(reply_q, m) + "[" + ", ".join([short] * min(n // 800, 45_000)) + "]}",
        msg_id=m,
    )
    m = next(ids)
    call("huge integer", _head(reply_q, m) + "9" * (n // 2) + "}", msg_id=m)
    m = next(ids)
    ints = ", ".join(["9" * 99] * min(n // 200, 45_000))  # within wire.MAX_VALUES
    call("many 99-digit integers", _head(reply_q, m) + "[" + ints + "]}", msg_id=m)
    m = next(ids)
    call("huge exponent", _head(reply_q, m) + "1e" + "9" * (n // 2) + "}", msg_id=m)
    m = next(ids)
    # An ordinary call (it passes every other check) whose instance uuids are the issue's
    # 65,000-character token... strings: the refusal quotes one, masked and cut in the log.
    ordinary = json.loads(json.loads(benign(m))["oslo.message"])
    ordinary.pop("_context_notes", None)
    token = "token" + "x" * min(n // 2, 65_000)
    ordinary["args"]["instance_uuids"] = [token] * len(ordinary["args"]["instance_uuids"])
    call("token... instance uuid", json.dumps(ordinary), msg_id=m)
    m = next(ids)
    bad = _head(reply_q, m).encode() + b'"' + b"\xff\xfe" * (n // 4) + b'"}'
    cases.append(Case("bad UTF-8", bad, m))
    m = next(ids)
    call("envelope in envelope", _nested_envelopes(reply_q, m, n), msg_id=m)
    m = next(ids)
    whole = benign(m)
    call("truncated ordinary call", whole[: len(whole) // 2], msg_id=m)
    cast = {
        "method": "sync_instance_info",
        "version": "4.2",
        "_unique_id": uuid.uuid4().hex,
        "args": {"host_name": "cn-1", "instance_uuids": ["x"] * (n // 8)},
    }
    broken = json.dumps(cast)[:-2] + ', "x": "' + "\\" * (n // 2)  # not valid JSON
    cases.append(Case("cast: a wide list, then backslashes", _enveloped(broken), None, True))
    return cases


def benign_call(reply_q: str, msg_id: str, call: Mapping[str, Any], size: int) -> bytes:
    """``call`` (an ordinary select_destinations) padded with notes to about ``size`` bytes:
    what the hostile cases' loop holds are compared with."""
    inner = {**call, **_addressed(reply_q, msg_id)}
    inner["_context_notes"] = ["n" * 60_000] * max(0, size // 60_000) + ["n" * (size % 60_000)]
    return _enveloped(json.dumps(inner))
