"""Event-loop lag: how late the loop wakes a timer is how long every request waited for it.

A component of its own (started right after the admin endpoint) so the Service starts and
stops it like the rest and its last/max lag appear in the health snapshot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from asyncsched.common.health import Snapshot
from asyncsched.common.tasks import cancel_and_wait

INTERVAL = 0.25  # seconds between samples: 4 wake-ups a second cost nothing measurable


@dataclass(frozen=True, slots=True)
class LoopLagHealth(Snapshot):
    """The latest and the largest event-loop lag seen, seconds."""

    last_s: float
    max_s: float


class LoopLagMonitor:
    name = "looplag"

    def __init__(self, observe: Callable[[float], None], *, interval: float = INTERVAL) -> None:
        self._observe = observe
        self._interval = interval
        self._task: asyncio.Task[None] | None = None
        self._last = 0.0
        self._max = 0.0

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="looplag")

    async def close(self) -> None:
        await cancel_and_wait(self._task)
        self._task = None

    def health(self) -> LoopLagHealth:
        return LoopLagHealth(last_s=round(self._last, 4), max_s=round(self._max, 4))

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(self._interval)
            lag = max(0.0, loop.time() - before - self._interval)
            self._last = lag
            self._max = max(self._max, lag)
            self._observe(lag)
