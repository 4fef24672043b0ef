"""The event loop's longest uninterrupted step while a coroutine runs: how the "loop never
stalls" tests (issue #13) measure a long request.

Steps are measured in the loop thread's CPU time (``time.thread_time``), with the garbage
collector paused: a step is work the code did without yielding, so neither the OS running
another process nor a collection of the whole test session's heap (both seen to add 0.2 s
on a loaded machine) is blamed on the code under test."""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class LoopSteps:
    result: Any
    longest: float  # the longest step between two loop turns, CPU seconds
    ticks: int  # loop turns the ticker saw
    total: float  # the whole run, CPU seconds of the loop thread


async def max_gap_while(coro: Any) -> LoopSteps:
    """Run ``coro`` while a 1 ms ticker records the loop's longest step and its turns."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.thread_time()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.thread_time()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.005)
    gaps.clear()
    was_enabled = gc.isenabled()
    gc.disable()
    t0 = time.thread_time()
    try:
        result = await coro
    finally:
        total = time.thread_time() - t0
        done.set()
        await task
        if was_enabled:
            gc.enable()
    return LoopSteps(result, max(gaps), len(gaps), total)
