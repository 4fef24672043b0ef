"""An event loop whose clock moves only when nothing is ready: timing races without the machine.

A test of a race decided by ``asyncio.sleep`` durations (random backoffs against a removal's
latency) on the real clock depends on how busy the machine is: under load the loop wakes late,
timers that were milliseconds apart fire in the same turn, and the race comes out otherwise.
:class:`VirtualClockLoop` keeps asyncio's own scheduling but reads time from a counter that
jumps to the next timer whenever no callback is ready and no file descriptor has anything, so
every timer fires in deadline order with nothing in between but what the code itself does, and
``asyncio.sleep(60)`` costs no wall time. Only for in-memory code: nothing waits on real I/O.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class _JumpingSelector(selectors.DefaultSelector):
    """Polls without blocking; where the loop would have slept, moves its clock instead."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualClockLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:  # no timer at all: only I/O can wake the loop
            return super().select(None)
        events = super().select(0)
        if not events and timeout > 0 and self.loop is not None:
            self.loop.advance(timeout)
        return events


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """A selector event loop on a virtual clock (see the module's docstring)."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self._now = 0.0

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds


def run_virtual(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion on a fresh :class:`VirtualClockLoop`, then close it."""
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
