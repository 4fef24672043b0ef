"""Concurrent callers asking the same question share one answer in flight."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """``await run(key, fn)``: the first caller runs ``fn``; callers with the same key that
    arrive before it finishes await the same result (or exception). A caller that is
    cancelled does not cancel the shared call for the others."""

    def __init__(self) -> None:
        self._inflight: dict[str, asyncio.Task[T]] = {}
        self.calls = 0  # fn actually run
        self.shared = 0  # callers that joined one already running

    async def run(self, key: str, fn: Callable[[], Awaitable[T]]) -> T:
        task = self._inflight.get(key)
        if task is None:
            self.calls += 1
            task = asyncio.ensure_future(fn())
            self._inflight[key] = task
            task.add_done_callback(lambda t: self._done(key, t))
        else:
            self.shared += 1
        return await asyncio.shield(task)

    def _done(self, key: str, task: asyncio.Task[T]) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if not task.cancelled():
            task.exception()  # retrieved: no "never retrieved" warning when all waiters left

    @property
    def in_flight(self) -> int:
        return len(self._inflight)
