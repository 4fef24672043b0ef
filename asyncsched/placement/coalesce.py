"""New claims that arrive together share one ``POST /allocations`` (Placement 1.13+).

A claim's cost in Placement is mostly its request and transaction, not its size: on this
project's machine Placement took about 30 to 60 ``PUT /allocations/{consumer}`` a second,
while POSTs of 8 to 32 consumers carried 1.8 to 2.6 times as many claims. ``POST
/allocations`` writes all its consumers in one transaction and judges each allocation as the
PUT would (capacity, provider and consumer generations), all or nothing, so Placement stays
the judge of every claim.

At most ``in_flight`` writes go to Placement at once. A claim that finds a slot free leaves at
once as its own PUT, so a lone boot waits for nothing. Claims that arrive while every slot is
busy queue here and leave together, up to ``max_batch`` in one POST. A refused POST wrote
nothing; its members are then sent as their own PUTs, so each gets Placement's own answer
(which the caller already knows how to read) and one refusal costs the others one round trip.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from asyncsched.placement.errors import (
    PlacementConnectionError,
    PlacementDisconnected,
    PlacementError,
    PlacementTimeout,
)
from asyncsched.placement.microversions import at_least

LOG = logging.getLogger(__name__)

#: POST /allocations exists from here on
POST_ALLOCATIONS_VERSION = "1.13"

#: a shared POST that failed this way may have been applied (or Placement is down): each
#: member handles it as it would its own PUT's failure (delete what may have landed)
_UNKNOWN_OUTCOME = (PlacementTimeout, PlacementDisconnected, PlacementConnectionError)


class Write(Protocol):
    """One Placement write: (status, parsed body). Raises PlacementError."""

    async def __call__(
        self, method: str, path: str, body: Any, version: str, op: str
    ) -> tuple[int, Any]: ...


@dataclass(frozen=True, slots=True)
class _Claim:
    consumer_uuid: str
    payload: Mapping[str, Any]
    version: str
    answer: asyncio.Future[tuple[int, Any]]


@dataclass(slots=True)
class CoalescerStats:
    """How claims left: alone (PUT), in shared POSTs, and POSTs Placement refused."""

    alone: int = 0
    posts: int = 0
    posted: int = 0
    refused: int = 0
    largest: int = 0


class ClaimCoalescer:
    """Claims of new consumers, each answered as its ``PUT /allocations/{consumer}`` would be."""

    def __init__(self, write: Write, *, max_batch: int, in_flight: int) -> None:
        self._write = write
        self._max_batch = max(1, max_batch)
        self._in_flight = max(1, in_flight)
        self._busy = 0
        self._queue: deque[_Claim] = deque()
        self._kick_scheduled = False
        self._sends: set[asyncio.Task[None]] = set()
        self.stats = CoalescerStats()

    async def put(
        self, consumer_uuid: str, payload: Mapping[str, Any], version: str
    ) -> tuple[int, Any]:
        """The (status, body) of this claim's PUT, or (204, None) from a shared POST."""
        loop = asyncio.get_running_loop()
        claim = _Claim(consumer_uuid, payload, version, loop.create_future())
        self._queue.append(claim)
        if not self._kick_scheduled:  # claims submitted in this loop turn may go together
            self._kick_scheduled = True
            loop.call_soon(self._kick)
        return await claim.answer

    async def close(self) -> None:
        """Cancel the writes in flight; queued claims fail with a PlacementError."""
        for claim in self._queue:
            _settle(claim, error=PlacementError("Placement client closed before the claim"))
        self._queue.clear()
        for task in list(self._sends):
            task.cancel()
        if self._sends:
            await asyncio.gather(*self._sends, return_exceptions=True)

    def _kick(self) -> None:
        self._kick_scheduled = False
        while self._busy < self._in_flight:
            batch = self._take()
            if not batch:
                return
            self._busy += 1
            task = asyncio.create_task(self._send(batch), name="placement-claim-write")
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)

    def _take(self) -> list[_Claim]:
        """Up to max_batch queued claims of one microversion, oldest first."""
        batch: list[_Claim] = []
        other: list[_Claim] = []
        while self._queue and len(batch) < self._max_batch:
            claim = self._queue.popleft()
            if claim.answer.done():  # its caller gave up while it queued
                continue
            if batch and claim.version != batch[0].version:
                other.append(claim)
            else:
                batch.append(claim)
        self._queue.extendleft(reversed(other))
        return batch

    async def _send(self, batch: list[_Claim]) -> None:
        failure = "Placement client closed during the claim"  # cancelled by close()
        try:
            if len(batch) == 1 or not at_least(batch[0].version, POST_ALLOCATIONS_VERSION):
                await asyncio.gather(*(self._alone(c) for c in batch))
            elif not await self._post(batch):
                await asyncio.gather(*(self._alone(c) for c in batch))
        except Exception as exc:  # a bug: its claims fail, the writer goes on with the rest
            LOG.exception("placement: writing %d claims failed unexpectedly", len(batch))
            failure = f"claim write failed unexpectedly: {exc!r}"
        finally:
            for claim in batch:  # never leave a caller waiting
                _settle(claim, error=PlacementError(failure))
            self._busy -= 1
            self._kick()

    async def _post(self, batch: list[_Claim]) -> bool:
        """One shared POST: True when it settled every member (written, or an outcome each
        member must handle itself); False when Placement refused it and wrote nothing."""
        body = {c.consumer_uuid: c.payload for c in batch}
        self.stats.posts += 1
        try:
            status, answer = await self._write(
                "POST", "/allocations", body, batch[0].version, "claim_batch"
            )
        except _UNKNOWN_OUTCOME as exc:
            for claim in batch:
                _settle(claim, error=exc)
            return True
        except PlacementError as exc:
            LOG.info("placement: shared claim of %d consumers failed (%s)", len(batch), exc)
            self.stats.refused += 1
            return False
        if status != 204:
            self.stats.refused += 1
            LOG.log(
                logging.DEBUG if status == 409 else logging.WARNING,
                "placement: shared claim of %d consumers refused (HTTP %s: %s); each is sent alone",
                len(batch),
                status,
                answer,
            )
            return False
        self.stats.posted += len(batch)
        self.stats.largest = max(self.stats.largest, len(batch))
        for claim in batch:
            _settle(claim, result=(204, None))
        return True

    async def _alone(self, claim: _Claim) -> None:
        self.stats.alone += 1
        try:
            result = await self._write(
                "PUT", f"/allocations/{claim.consumer_uuid}", claim.payload, claim.version, "claim"
            )
        except PlacementError as exc:
            _settle(claim, error=exc)
        else:
            _settle(claim, result=result)


def _settle(
    claim: _Claim,
    *,
    result: tuple[int, Any] | None = None,
    error: BaseException | None = None,
) -> None:
    if claim.answer.done():
        return
    if error is not None:
        claim.answer.set_exception(error)
    else:
        assert result is not None
        claim.answer.set_result(result)
