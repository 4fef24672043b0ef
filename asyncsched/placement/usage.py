"""A resource provider's capacity and usage, and where the overcommit guard reads them.

``UsageSource`` is one coroutine so that any reader of Placement can serve it: the Placement
client (``GET .../inventories`` + ``GET .../usages``), or Placement's database when the mirror
names it (``scheduling/candidates/guard_usage.py``). A source must show every write Placement
accepted before the call (the guard asks right after its own claim), so a cached source has to
read afresh for it. A source that can also say in which order the claims on a provider were
written (``RankedUsageSource``: Placement's database can, its API cannot) lets racing guards
agree on which claims back out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from asyncsched.common.capacity import capacity as placement_capacity


@dataclass(frozen=True, slots=True)
class ProviderUsage:
    """Per resource class: what the provider can hold and what is allocated on it."""

    capacity: Mapping[str, int]
    used: Mapping[str, int]

    @classmethod
    def parse(cls, capacity: Mapping[str, int], usages: Any) -> ProviderUsage:
        """``capacity`` (see ``capacities``) with Placement's ``usages`` body (inner mapping)."""
        used = {rc: int(n) for rc, n in dict(usages).items() if int(n)}
        return cls(capacity, used)

    def over(self) -> dict[str, int]:
        """Resource classes used beyond capacity, with the excess."""
        return {
            rc: n - self.capacity.get(rc, 0)
            for rc, n in self.used.items()
            if n > self.capacity.get(rc, 0)
        }


def capacities(inventories: Any) -> dict[str, int]:
    """Per class, from Placement's ``inventories`` body (inner mapping): Placement's own rule
    ``int((total - reserved) * allocation_ratio)``. An integer usage above the float bound is
    above its integer part, so comparing with this is Placement's comparison."""
    return {
        rc: placement_capacity(
            int(inv["total"]), int(inv.get("reserved", 0)), float(inv.get("allocation_ratio", 1.0))
        )
        for rc, inv in dict(inventories).items()
    }


class UsageSource(Protocol):
    """Fresh capacity and usage of one provider; raises PlacementError when it cannot say."""

    async def provider_usage(self, provider_uuid: str) -> ProviderUsage: ...


@dataclass(frozen=True, slots=True)
class Holdings:
    """One provider read in one query: its usage and the consumers holding it, in the order
    Placement wrote their allocations (oldest first; ``used`` is their sum)."""

    usage: ProviderUsage
    consumers: tuple[tuple[str, Mapping[str, int]], ...]

    def newest_beyond(self, classes: Iterable[str]) -> set[str]:
        """The consumers whose claims, newest first, make up the excess over capacity in
        ``classes``: the ones that back out so that the older ones fit. Every guard that reads
        the same rows names the same consumers."""
        wanted = frozenset(classes)
        out: set[str] = set()
        for rc, excess in self.usage.over().items():
            if rc not in wanted:
                continue
            left = excess
            for consumer, used in reversed(self.consumers):
                if left <= 0:
                    break
                if used.get(rc, 0) > 0:
                    out.add(consumer)
                    left -= used[rc]
        return out


@runtime_checkable
class RankedUsageSource(UsageSource, Protocol):
    """A UsageSource that can also read a provider's holdings in write order; None when it
    cannot now (the guard then resolves the race as an unranked source's)."""

    async def provider_holdings(self, provider_uuid: str) -> Holdings | None: ...
