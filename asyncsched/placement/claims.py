"""Concurrent, bounded claims for the instances of one multi-create, rolled back together.

nova claims instance k, then decides instance k+1, one HTTP round trip at a time. Here the
decision loop stays sequential (instance k+1 sees instance k's consumption because the caller
*assumes* it on the HostState before submitting the claim) while the claims themselves run
concurrently, at most ``concurrency`` at once. A failed claim calls the caller's
``on_failure`` (release the assumption, pick another host); ``rollback()`` deletes every claim
that succeeded when the request as a whole cannot be completed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from asyncsched.exceptions import AllocationUpdateFailed
from asyncsched.placement.microversions import CANDIDATES_VERSION

LOG = logging.getLogger(__name__)


class Claimer(Protocol):
    """What a ClaimBatch needs: PlacementClient.claim and .rollback."""

    async def claim(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        allocation_request_version: str = ...,
        may_have_allocations: bool = ...,
    ) -> bool: ...

    async def rollback(self, consumer_uuids: Iterable[str]) -> None: ...


@runtime_checkable
class TakesOver(Protocol):
    """A Claimer that can take over an allocation another process wrote (PlacementClient)."""

    async def take_over(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        generation: int,
        project_id: str,
        user_id: str,
        before: Mapping[str, Mapping[str, int]] | None = None,
    ) -> bool: ...


@dataclass(frozen=True, slots=True)
class ClaimResult:
    consumer_uuid: str
    ok: bool
    allocation_request: Mapping[str, Any]
    error: BaseException | None = None


class ClaimBatch:
    """The claims of one select_destinations call. ``async with`` rolls back on an exception."""

    def __init__(
        self,
        client: Claimer,
        *,
        concurrency: int,
        project_id: str,
        user_id: str,
        allocation_request_version: str = CANDIDATES_VERSION,
    ) -> None:
        self._client = client
        self._sem = asyncio.Semaphore(max(1, concurrency))
        self._project_id = project_id
        self._user_id = user_id
        self._version = allocation_request_version
        self._tasks: dict[str, asyncio.Task[ClaimResult]] = {}

    async def __aenter__(self) -> ClaimBatch:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            await self.rollback()

    def submit(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        may_have_allocations: bool = False,
        on_failure: Callable[[ClaimResult], None] | None = None,
    ) -> asyncio.Task[ClaimResult]:
        """Start the claim for one instance; returns at once. One claim per consumer."""
        if consumer_uuid in self._tasks:
            raise ValueError(f"consumer {consumer_uuid} already has a claim in this batch")
        task = asyncio.create_task(
            self._run(consumer_uuid, allocation_request, may_have_allocations, on_failure),
            name=f"claim-{consumer_uuid}",
        )
        self._tasks[consumer_uuid] = task
        return task

    def take_over(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        generation: int,
        before: Mapping[str, Mapping[str, int]],
    ) -> bool:
        """Start taking over an allocation the consumer already holds (an earlier delivery's
        claim, adopted; ``before``: what else it holds, a move's source): from then on it is
        this batch's claim, rolled back with the others. False when the client cannot (the
        allocation is then answered as it stands)."""
        client = self._client
        if not isinstance(client, TakesOver):
            return False
        if consumer_uuid in self._tasks:
            raise ValueError(f"consumer {consumer_uuid} already has a claim in this batch")

        async def write() -> bool:
            return await client.take_over(
                consumer_uuid,
                allocation_request,
                generation=generation,
                project_id=self._project_id,
                user_id=self._user_id,
                before=before,
            )

        task = asyncio.create_task(
            self._guarded(consumer_uuid, allocation_request, write), name=f"take-{consumer_uuid}"
        )
        self._tasks[consumer_uuid] = task
        return True

    def forget(self, consumer_uuid: str) -> None:
        """Drop a *failed* claim so the consumer can be submitted again on another host."""
        task = self._tasks.get(consumer_uuid)
        if task is not None and task.done() and not task.result().ok:
            del self._tasks[consumer_uuid]

    async def _run(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        may_have_allocations: bool,
        on_failure: Callable[[ClaimResult], None] | None,
    ) -> ClaimResult:
        def write() -> Awaitable[bool]:
            return self._client.claim(
                consumer_uuid,
                allocation_request,
                project_id=self._project_id,
                user_id=self._user_id,
                allocation_request_version=self._version,
                may_have_allocations=may_have_allocations,
            )

        result = await self._guarded(consumer_uuid, allocation_request, write)
        if not result.ok and on_failure is not None:
            try:
                on_failure(result)
            except Exception:
                LOG.exception("placement: on_failure callback for %s failed", consumer_uuid)
        return result

    async def _guarded(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        write: Callable[[], Awaitable[bool]],
    ) -> ClaimResult:
        """One write under the concurrency bound; any error becomes the result's."""
        error: BaseException | None = None
        ok = False
        async with self._sem:
            try:
                ok = await write()
            except Exception as exc:  # a claim must never take the batch down
                error = exc
                if not isinstance(exc, AllocationUpdateFailed):
                    LOG.exception("placement: unexpected error claiming %s", consumer_uuid)
        return ClaimResult(consumer_uuid, ok, allocation_request, error)

    async def wait(self) -> dict[str, ClaimResult]:
        """Wait for every submitted claim; results by consumer uuid, in submission order."""
        if self._tasks:
            await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        return {u: t.result() for u, t in self._tasks.items() if not t.cancelled()}

    @property
    def claimed(self) -> list[str]:
        """Consumers whose claim has completed successfully so far."""
        return [
            u for u, t in self._tasks.items() if t.done() and not t.cancelled() and t.result().ok
        ]

    async def rollback(self) -> int:
        """Let in-flight claims finish, then delete every successful one (never leaked).

        Returns how many claims it deleted.
        """
        await self.wait()
        claimed = self.claimed
        if claimed:
            LOG.info("placement: rolling back %d claims", len(claimed))
            await self._client.rollback(claimed)
        for u in claimed:
            self._tasks.pop(u, None)
        return len(claimed)
