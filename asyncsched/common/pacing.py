"""Give the event loop a turn during long CPU-bound loops.

One process serves every caller from one event loop. A loop that runs for a second without
awaiting anything (deciding 5,000 instances, rolling them back) delays every other call, the
AMQP heartbeats and the systemd watchdog by that second. A :class:`Pacer` is ticked once per
step of such a loop and yields only when ``budget`` seconds have passed since the last turn,
so a short loop costs nothing and a long one yields about every ``budget`` seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

#: seconds of uninterrupted work before a loop yields: heartbeats and other calls then wait
#: at most about this long for one long request.
DEFAULT_BUDGET = 0.01


class Pacer:
    """Yields to the loop when ``budget`` seconds passed since the last yield."""

    __slots__ = ("_budget", "_clock", "_last", "yields")

    def __init__(
        self, budget: float = DEFAULT_BUDGET, *, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._budget = budget
        self._clock = clock
        self._last = clock()
        self.yields = 0

    async def tick(self) -> None:
        """One step done: yield if this run of steps has used up the budget."""
        if self._clock() - self._last >= self._budget:
            await asyncio.sleep(0)
            self.yields += 1
            self._last = self._clock()
