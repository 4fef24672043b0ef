"""LateReplies: the count of pending retries is exact the moment a reply is counted delivered."""

from __future__ import annotations

import asyncio
from collections import Counter

from asyncsched.rpc.late_replies import LateReplies


async def test_a_delivered_reply_is_no_longer_pending_in_the_same_step() -> None:
    async def publish(routing_key: str, body: bytes, *, retry: float) -> bool:
        return True

    stats: Counter[str] = Counter()
    late = LateReplies(publish, retry_for=5.0, max_pending=4, max_bytes=1024, stats=stats)
    assert late.retry("reply_q", b"{}", "req-1")
    assert len(late) == 1
    await asyncio.sleep(0)  # the retry runs to its end; its done-callback is not yet run
    assert stats["replies_late"] == 1
    assert len(late) == 0 and late.held_bytes == 0


async def test_an_undeliverable_reply_is_dropped_and_counted() -> None:
    async def publish(routing_key: str, body: bytes, *, retry: float) -> bool:
        return False

    stats: Counter[str] = Counter()
    late = LateReplies(publish, retry_for=5.0, max_pending=4, max_bytes=1024, stats=stats)
    assert late.retry("reply_q", b"{}", "req-1")
    await asyncio.sleep(0)
    assert stats["replies_dropped"] == 1 and stats["replies_late"] == 0
    assert len(late) == 0
