"""Bounded memory of answered requests, so a redelivered call is answered, not redone.

Keys are the server's: ``_unique_id`` plus a digest of the body, so only the same request
(not another one reusing its id) is answered from here.

RabbitMQ redelivers an unacked request when our connection drops before the ack lands. The
caller may still be waiting, so the same reply is sent again, from here, without calling the
scheduler twice. Count and age are bounded ([asyncsched] reply_cache_size / reply_cache_ttl), and
so is the memory the kept replies hold (``max_bytes``): a large multi-create reply can be
hundreds of kilobytes.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a request produced: a result or a failure payload (casts: both None)."""

    result: Any = None
    failure: str | None = None

    def approx_bytes(self) -> int:
        """Roughly the memory a cached reply holds (its JSON length), for ``max_bytes``."""
        size = len(self.failure or "")
        if self.result is not None:
            size += len(json.dumps(self.result, default=str))
        return size


class ReplyCache:
    def __init__(
        self,
        max_size: int,
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self._max = max(1, max_size)
        self._ttl = ttl
        self._clock = clock
        self._max_bytes = max_bytes
        self._bytes = 0
        self._items: OrderedDict[str, tuple[float, Outcome, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, unique_id: str) -> Outcome | None:
        item = self._items.get(unique_id)
        if item is None:
            return None
        expires, outcome, size = item
        if expires < self._clock():
            del self._items[unique_id]
            self._bytes -= size
            return None
        return outcome

    @property
    def bytes(self) -> int:
        return self._bytes

    def put(self, unique_id: str, outcome: Outcome, size: int = 0) -> None:
        old = self._items.pop(unique_id, None)
        if old is not None:
            self._bytes -= old[2]
        self._items[unique_id] = (self._clock() + self._ttl, outcome, size)
        self._bytes += size
        self._expire()

    def _expire(self) -> None:
        now = self._clock()
        while self._items:
            key, (expires, _, size) = next(iter(self._items.items()))
            too_many = len(self._items) > self._max
            too_big = self._bytes > self._max_bytes and len(self._items) > 1
            if too_many or too_big or expires < now:
                del self._items[key]
                self._bytes -= size
            else:
                break
