"""Bounded memory of answered ``_unique_id``s, so a redelivered call is answered, not redone.

RabbitMQ redelivers an unacked request when our connection drops before the ack lands. The
caller may still be waiting, so the same reply is sent again, from here, without calling the
scheduler twice. Size and age are bounded ([asyncsched] reply_cache_size / reply_cache_ttl).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a request produced: a result or a failure payload (casts: both None)."""

    result: Any = None
    failure: str | None = None


class ReplyCache:
    def __init__(
        self, max_size: int, ttl: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._max = max(1, max_size)
        self._ttl = ttl
        self._clock = clock
        self._items: OrderedDict[str, tuple[float, Outcome]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, unique_id: str) -> Outcome | None:
        item = self._items.get(unique_id)
        if item is None:
            return None
        expires, outcome = item
        if expires < self._clock():
            del self._items[unique_id]
            return None
        return outcome

    def put(self, unique_id: str, outcome: Outcome) -> None:
        self._items[unique_id] = (self._clock() + self._ttl, outcome)
        self._items.move_to_end(unique_id)
        self._expire()

    def _expire(self) -> None:
        now = self._clock()
        while self._items:
            key, (expires, _) = next(iter(self._items.items()))
            if len(self._items) > self._max or expires < now:
                del self._items[key]
            else:
                break
