"""The overcommit guard's usage reads from Placement's database when the mirror names it.

Each claim the guard confirms costs Placement's API one or two extra requests; read from the
database they cost Placement's workers nothing, which is what the claim rate (the floor of
every boot) is made of. A provider the database does not show, or a database that cannot be
read, is asked of Placement's API as before, so the guard never judges on less.

The database also shows the order Placement wrote a provider's allocations in (their serial
ids), which its API does not: with it, racing guards agree on which claims back out (the
newest beyond capacity) instead of each pausing at random (``placement/overcommit.py``). That
read is only made for a claim found over capacity, on a one-connection pool of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from asyncsched.common.capacity import capacity as placement_capacity
from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.placement.usage import Holdings, ProviderUsage, UsageSource
from asyncsched.state.db import NovaDatabase
from asyncsched.state.placement_mirror.statements import BY_DIALECT
from asyncsched.state.placement_mirror.usage import ProviderUsageReader

LOG = logging.getLogger(__name__)

# The read (``PROVIDER_HOLDINGS`` in the mirror's statements, one per dialect): one provider
# in one snapshot, each inventory's capacity inputs (consumer NULL), then every allocation row
# on it with the serial id Placement gave it (rows of one write are one transaction's, so a
# consumer's newest row dates its claim).


class HoldingsReader:
    """A provider's :class:`Holdings` from Placement's database (DatabaseUnavailable else)."""

    def __init__(self, url: str, *, timeout: float) -> None:
        self._db = NovaDatabase(
            "placement database (overcommit guard ranks)",
            url,
            pool_size=1,
            query_timeout=timeout,
            reconnect_max=timeout,
            clock=time.monotonic,
        )
        self._sql = BY_DIALECT[self._db.parsed.dialect].provider_holdings

    async def read(self, provider_uuid: str) -> Holdings | None:
        """None: the database does not know the provider."""
        rows = await self._db.fetch(self._sql, provider_uuid)
        capacity: dict[str, int] = {}
        held: dict[str, tuple[int, dict[str, int]]] = {}  # consumer: (newest row id, used)
        for name, consumer, total, reserved, ratio, row_id in rows:
            if consumer is None:
                capacity[name] = placement_capacity(total, reserved, float(ratio))
                continue
            newest, used = held.get(consumer, (0, {}))
            used[name] = used.get(name, 0) + int(total)
            held[consumer] = (max(newest, int(row_id)), used)
        if not capacity:
            return None
        order = sorted(held.items(), key=lambda kv: (kv[1][0], kv[0]))
        consumers = tuple((c, used) for c, (_, used) in order)
        return Holdings(ProviderUsage(capacity, _sum(consumers)), consumers)

    async def close(self) -> None:
        await self._db.close()


def _sum(consumers: tuple[tuple[str, Mapping[str, int]], ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, used in consumers:
        for rc, n in used.items():
            out[rc] = out.get(rc, 0) + n
    return {rc: n for rc, n in out.items() if n}


class DatabaseUsage:
    """A :class:`UsageSource` over Placement's database, the API as its fallback; with a
    :class:`HoldingsReader` also a ``RankedUsageSource``."""

    def __init__(
        self,
        reader: ProviderUsageReader,
        fallback: UsageSource,
        holdings: HoldingsReader | None = None,
    ) -> None:
        self._reader = reader
        self._fallback = fallback
        self._holdings = holdings
        self.reads = 0
        self.fallbacks = 0

    async def provider_usage(self, provider_uuid: str) -> ProviderUsage:
        try:
            capacity, used = await self._reader.read(provider_uuid)
        except DatabaseUnavailable as exc:
            LOG.debug("overcommit guard: %s; asking Placement's API", exc)
            capacity = {}
        if capacity:
            self.reads += 1
            return ProviderUsage(capacity, used)
        self.fallbacks += 1
        return await self._fallback.provider_usage(provider_uuid)

    async def provider_holdings(self, provider_uuid: str) -> Holdings | None:
        if self._holdings is None:
            return None
        try:
            return await self._holdings.read(provider_uuid)
        except DatabaseUnavailable as exc:
            LOG.info("overcommit guard: %s; the race is resolved unranked", exc)
            return None

    async def close(self) -> None:
        if self._holdings is not None:
            await self._holdings.close()
