"""The overcommit guard's usage reads from Placement's database when the mirror names it.

Each claim the guard confirms costs Placement's API one or two extra requests; read from the
database they cost Placement's workers nothing, which is what the claim rate (the floor of
every boot) is made of. A provider the database does not show, or a database that cannot be
read, is asked of Placement's API as before, so the guard never judges on less.
"""

from __future__ import annotations

import logging

from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.placement.usage import ProviderUsage, UsageSource
from asyncsched.state.placement_mirror.usage import ProviderUsageReader

LOG = logging.getLogger(__name__)


class DatabaseUsage:
    """A :class:`UsageSource` over Placement's database, the API as its fallback."""

    def __init__(self, reader: ProviderUsageReader, fallback: UsageSource) -> None:
        self._reader = reader
        self._fallback = fallback
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
