"""The event loop's longest gap while a coroutine runs: how the "loop never stalls" tests
(issue #13) measure a long request."""

from __future__ import annotations

import asyncio
import time
from typing import Any


async def max_gap_while(coro: Any) -> tuple[Any, float, int]:
    """Run ``coro`` while a 1 ms ticker records the loop's longest gap and its tick count."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.005)
    gaps.clear()
    try:
        result = await coro
    finally:
        done.set()
        await task
    return result, max(gaps), len(gaps)
