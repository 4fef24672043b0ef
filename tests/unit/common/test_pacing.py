"""Pacer: yields once its budget of uninterrupted work is used up, not before."""

from __future__ import annotations

import asyncio

from asyncsched.common.pacing import Pacer


async def test_yields_only_when_the_budget_is_spent() -> None:
    now = [0.0]
    pacer = Pacer(0.01, clock=lambda: now[0])
    others = 0

    async def other() -> None:
        nonlocal others
        while True:
            others += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    await asyncio.sleep(0)
    seen = others
    for _ in range(5):  # 5 ms of work: no turn for anyone else
        now[0] += 0.001
        await pacer.tick()
    assert (pacer.yields, others) == (0, seen)
    now[0] += 0.006  # 11 ms since the last turn
    await pacer.tick()
    assert pacer.yields == 1 and others > seen
    await pacer.tick()  # the budget starts again after a turn
    assert pacer.yields == 1
    task.cancel()
