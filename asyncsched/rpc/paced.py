"""Encode a large reply with loop turns in between (issue #13: the loop never stalls).

A 5,000-instance select_destinations reply with alternates is about 17 MB of JSON. Encoding it
in one ``json.dumps`` (then escaping it into the envelope) held the event loop for over half
a second, so heartbeats and every other call waited. Here the result is encoded one item at a
time and escaped into the envelope piece by piece, with a :class:`Pacer` tick after each, and
the pieces are joined once; the bytes are those of ``wire.reply_body`` (escaping is per code
point, so pieces join exactly). A worker thread would not help: ``json.dumps`` holds the GIL
for the whole call.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any, TypeVar

from asyncsched.common.pacing import Pacer
from asyncsched.rpc import wire

T = TypeVar("T")

#: characters escaped between ticks: about a millisecond of ``json.dumps`` on one core.
ESCAPE_SLICE = 256 * 1024


async def dumps_list(items: Iterable[Any], pacer: Pacer) -> wire.RawJSON:
    """A JSON array of ``items`` (lazily produced ones are built between ticks too)."""
    parts = ["["]
    for item in items:
        if len(parts) > 1:
            parts.append(", ")
        parts.append(wire.dumps(item))
        await pacer.tick()
    parts.append("]")
    return wire.RawJSON(tuple(parts))


async def reply_body(
    msg_id: str,
    result: Any,
    failure: str | None,
    pacer: Pacer,
    *,
    unique_id: str | None = None,
    slice_chars: int = ESCAPE_SLICE,
) -> bytes:
    """``wire.reply_body(..., ending=True)``, escaped piece by piece, joined once at the end."""
    escaped: list[bytes] = []
    for part in wire.reply_inner(msg_id, result, failure, True, unique_id):
        for start in range(0, len(part), slice_chars):
            escaped.append(wire.escape(part[start : start + slice_chars]))
            await pacer.tick()
    return wire.seal(escaped)


async def drive(steps: Generator[None, None, T], pacer: Pacer) -> T:
    """Run a generator of CPU-bound steps (e.g. ``wire.decode_steps``) with a tick after each."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result
        await pacer.tick()
