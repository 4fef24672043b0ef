"""Ending a background task on the way out: the one cancel-and-wait the components share."""

from __future__ import annotations

import asyncio
from typing import Any


async def cancel_and_wait(task: asyncio.Future[Any] | None, *, quiet: bool = False) -> None:
    """Cancel ``task`` (None: nothing to do) and wait until it has ended.

    Its cancellation is expected and swallowed; an error it ended with propagates, unless
    ``quiet`` (a close that must go on whatever the task did). Unlike a bare
    ``with suppress(CancelledError): await task``, a cancellation of the *waiting* task that
    arrives meanwhile is not swallowed: it is told apart by the waiter's ``cancelling()``
    count, so a close run while the waiter is already being cancelled still works.
    """
    if task is None:
        return
    task.cancel()
    me = asyncio.current_task()
    before = me.cancelling() if me is not None else 0
    try:
        await task
    except asyncio.CancelledError:
        if me is not None and me.cancelling() > before:
            raise
    except Exception:
        if not quiet:
            raise
