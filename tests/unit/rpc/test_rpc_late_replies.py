"""LateReplies: the count of pending retries is exact the moment a reply is counted delivered
(or dropped)."""

from __future__ import annotations

import asyncio

import pytest

from asyncsched.rpc.late_replies import LateReplies
from asyncsched.rpc.stats import RPCCounters


@pytest.mark.parametrize(
    ("delivered", "counted"),
    [(True, RPCCounters(replies=1, replies_late=1)), (False, RPCCounters(replies_dropped=1))],
)
async def test_a_finished_retry_is_no_longer_pending_in_the_same_step(
    delivered: bool, counted: RPCCounters
) -> None:
    async def publish(routing_key: str, body: bytes, *, retry: float) -> bool:
        return delivered

    stats = RPCCounters()
    late = LateReplies(publish, retry_for=5.0, max_pending=4, max_bytes=1024, stats=stats)
    assert late.retry("reply_q", b"{}", "req-1")
    assert len(late) == 1 and late.held_bytes == 2
    await asyncio.sleep(0)  # the retry runs to its end; its done-callback is not yet run
    assert stats == counted
    assert len(late) == 0 and late.held_bytes == 0
