"""Replies whose first publish failed, retried in the background so no other call waits on them.

A reply is returned by RabbitMQ when its reply queue does not exist (yet: oslo declares it
lazily; or any more: the caller died). oslo retries such a reply for
``kombu_missing_consumer_retry_timeout`` seconds. Done inline, that retry kept the request
unacked and its prefetch slot taken, so 40 calls to missing reply queues held up every call
behind them for a minute. Here each undelivered reply gets its own retry task and the request
is acked at once; the tasks are bounded in number and bytes, and a reply that does not fit is
dropped (its caller is gone or will time out, as with oslo after the retry window).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Protocol

from asyncsched.rpc.stats import RPCCounters

LOG = logging.getLogger("asyncsched.rpc")


class Publish(Protocol):
    """``BrokerLink.publish``: True once the broker took the message."""

    def __call__(self, routing_key: str, body: bytes, *, retry: float) -> Awaitable[bool]: ...


class LateReplies:
    """A bounded set of background reply retries."""

    def __init__(
        self,
        publish: Publish,
        *,
        retry_for: float,
        max_pending: int,
        max_bytes: int,
        stats: RPCCounters,
    ) -> None:
        self._publish = publish
        self._retry_for = retry_for
        self._max_pending = max_pending
        self._max_bytes = max_bytes
        self._stats = stats
        self._bytes = 0
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        # Not len(self._tasks): a finished task leaves that set only when its done-callback
        # runs, a loop step after its reply was counted as delivered.
        return len(self.pending())

    @property
    def held_bytes(self) -> int:
        return self._bytes

    def retry(self, reply_q: str, body: bytes, request_id: str | None) -> bool:
        """Keep retrying ``body`` in the background; False (and dropped) when over the bounds."""
        if self._retry_for <= 0:
            self._dropped(reply_q, request_id, "kombu_missing_consumer_retry_timeout is 0")
            return False
        if len(self._tasks) >= self._max_pending or self._bytes + len(body) > self._max_bytes:
            self._dropped(reply_q, request_id, "too many undelivered replies pending")
            return False
        self._bytes += len(body)
        task = asyncio.create_task(self._run(reply_q, body, request_id))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, reply_q: str, body: bytes, request_id: str | None) -> None:
        try:
            if await self._publish(reply_q, body, retry=self._retry_for):
                self._stats.replies += 1
                self._stats.replies_late += 1
            else:
                self._dropped(reply_q, request_id, f"not deliverable for {self._retry_for:g}s")
        except Exception:
            LOG.exception("Retrying the reply to %s (request_id=%s) failed", reply_q, request_id)
            self._stats.replies_dropped += 1
        finally:
            self._bytes -= len(body)

    def _dropped(self, reply_q: str, request_id: str | None, why: str) -> None:
        self._stats.replies_dropped += 1
        LOG.warning(
            "Reply to %s (request_id=%s) could not be delivered (%s); dropped",
            reply_q,
            request_id,
            why,
        )

    def pending(self) -> set[asyncio.Task[None]]:
        """The retries still running (``drain`` waits for them in its budget)."""
        return {t for t in self._tasks if not t.done()}

    async def close(self) -> None:
        """Give up on every pending retry."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
