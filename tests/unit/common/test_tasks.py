"""common.tasks.cancel_and_wait: the task ends, its cancellation is swallowed, the waiter's
is not, and an error the task ended with propagates unless quiet."""

from __future__ import annotations

import asyncio

import pytest

from asyncsched.common.tasks import cancel_and_wait


async def _forever() -> None:
    await asyncio.Event().wait()


async def _fails_on_cancel() -> None:
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        raise RuntimeError("cleanup failed") from None


async def test_cancels_a_running_task_and_waits_for_it() -> None:
    task = asyncio.create_task(_forever())
    await asyncio.sleep(0)
    await cancel_and_wait(task)
    assert task.cancelled()
    await cancel_and_wait(None)
    await cancel_and_wait(task)  # already ended: nothing to do


async def test_an_error_the_task_ends_with_propagates_unless_quiet() -> None:
    task = asyncio.create_task(_fails_on_cancel())
    await asyncio.sleep(0)
    with pytest.raises(RuntimeError, match="cleanup failed"):
        await cancel_and_wait(task)
    task = asyncio.create_task(_fails_on_cancel())
    await asyncio.sleep(0)
    await cancel_and_wait(task, quiet=True)
    assert task.done() and isinstance(task.exception(), RuntimeError)


async def test_the_waiters_own_cancellation_is_not_swallowed() -> None:
    stubborn_done = asyncio.Event()

    async def stubborn() -> None:  # takes a while to end once cancelled
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0.05)
            stubborn_done.set()
            raise

    inner = asyncio.create_task(stubborn())
    await asyncio.sleep(0)
    closer = asyncio.create_task(cancel_and_wait(inner))
    await asyncio.sleep(0.01)
    closer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closer
    assert closer.cancelled()


async def test_works_inside_a_waiter_that_is_already_being_cancelled() -> None:
    inner = asyncio.create_task(_forever())
    closed = asyncio.Event()

    async def owner() -> None:
        try:
            await asyncio.Event().wait()
        finally:  # runs while this task is being cancelled: the close must still complete
            await cancel_and_wait(inner)
            closed.set()

    task = asyncio.create_task(owner())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set() and inner.cancelled()
