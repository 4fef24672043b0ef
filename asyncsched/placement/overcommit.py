"""The overcommit guard: a claim Placement accepted is confirmed within capacity afterwards.

The real Placement (16.0.0 on PostgreSQL) accepts two concurrent ``PUT /allocations`` on one
provider even when only one fits: both answer 204 and the usage ends above capacity. One
asyncsched process claims one at a time per provider (``PlacementClient``); across processes
(several schedulers, or nova-scheduler beside us) nothing prevents it, nova included.

So after each new claim the guard reads the usage of the providers it touched. When one is
over capacity in a resource class the claim uses, every claim in the race sees that. Each
waits a random time in ``[0, backoff)`` and looks again: the first to look again backs its
claim out (the scheduler decides that instance again elsewhere); the later ones see the
provider fit again and keep theirs. Two claims that look again within one round trip of each
other both back out: capacity is lost for that one instance, never exceeded. A provider over
capacity in classes our claim does not use is not ours to fix: it is logged and counted.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from asyncsched.exceptions import AllocationDeleteFailed, PlacementError
from asyncsched.placement.health import GuardHealth
from asyncsched.placement.usage import ProviderUsage, UsageSource

LOG = logging.getLogger(__name__)

#: seconds: the window in which claims of one race look again. Wider = fewer races where
#: both back out, longer wait for a claim that raced (only those wait).
DEFAULT_BACKOFF = 0.5


@dataclass(slots=True)
class GuardStats:
    confirmed: int = 0
    raced: int = 0  # found over capacity at the first look
    backed_out: int = 0
    kept_after_race: int = 0
    foreign_over: int = 0  # providers over capacity in classes our claim does not use
    unchecked: int = 0  # usage could not be read: the claim is kept as Placement accepted it


class OvercommitGuard:
    """Confirms claims against a UsageSource; backs a racing claim out with ``remove``."""

    def __init__(
        self,
        usages: UsageSource,
        remove: Callable[[str], Awaitable[None]],
        *,
        backoff: float = DEFAULT_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        self.usages = usages  # replaceable: the Placement mirror can serve it later
        self._remove = remove
        self.backoff = backoff
        self._rng = rng or random.Random()
        self.stats = GuardStats()

    async def confirm(self, consumer_uuid: str, allocation_request: Mapping[str, Any]) -> bool:
        """True: the claim stays. False: it was over capacity and has been backed out."""
        mine = {
            rp: dict(a.get("resources") or {})
            for rp, a in (allocation_request.get("allocations") or {}).items()
        }
        over = await self._over(consumer_uuid, mine)
        if not over:
            self.stats.confirmed += 1
            return True
        self.stats.raced += 1
        await asyncio.sleep(self._rng.uniform(0, self.backoff))
        over = await self._over(consumer_uuid, mine)
        if not over:
            self.stats.kept_after_race += 1
            self.stats.confirmed += 1
            LOG.info(
                "overcommit guard: providers of %s fit again after the race; claim kept",
                consumer_uuid,
            )
            return True
        LOG.warning(
            "overcommit guard: %s over capacity after the claim of %s (a concurrent claim "
            "elsewhere); backing it out to decide the instance again",
            "; ".join(f"{rp} {_excess(e)}" for rp, e in over.items()),
            consumer_uuid,
        )
        self.stats.backed_out += 1
        try:
            await self._remove(consumer_uuid)
        except (AllocationDeleteFailed, PlacementError) as exc:  # kept for retry by remove
            LOG.error("overcommit guard: backing out %s failed: %s", consumer_uuid, exc)
        return False

    async def _over(
        self, consumer_uuid: str, mine: Mapping[str, Mapping[str, int]]
    ) -> dict[str, dict[str, int]]:
        """Per provider of the claim: the classes it uses that are over capacity."""
        rps = list(mine)
        got = await asyncio.gather(
            *(self.usages.provider_usage(rp) for rp in rps), return_exceptions=True
        )
        out: dict[str, dict[str, int]] = {}
        for rp, usage in zip(rps, got, strict=True):
            if isinstance(usage, BaseException):
                if not isinstance(usage, Exception):
                    raise usage
                self.stats.unchecked += 1
                LOG.warning(
                    "overcommit guard: usage of %s unreadable (%s); claim of %s kept unchecked",
                    rp,
                    usage,
                    consumer_uuid,
                )
                continue
            excess = usage.over()
            ours = {rc: n for rc, n in excess.items() if mine[rp].get(rc)}
            if len(ours) < len(excess):
                self.stats.foreign_over += 1
                LOG.warning(
                    "overcommit guard: provider %s over capacity in classes %s does not use: %s",
                    rp,
                    consumer_uuid,
                    _excess({rc: n for rc, n in excess.items() if rc not in ours}, usage),
                )
            if ours:
                out[rp] = ours
        return out

    def health(self) -> GuardHealth:
        s = self.stats
        return GuardHealth(
            confirmed=s.confirmed,
            raced=s.raced,
            backed_out=s.backed_out,
            kept_after_race=s.kept_after_race,
            foreign_over=s.foreign_over,
            unchecked=s.unchecked,
        )


def _excess(excess: Mapping[str, int], usage: ProviderUsage | None = None) -> str:
    if usage is None:
        return ", ".join(f"{rc} +{n}" for rc, n in sorted(excess.items()))
    return ", ".join(
        f"{rc} {usage.used.get(rc, 0)}/{usage.capacity.get(rc, 0)}" for rc in sorted(excess)
    )
