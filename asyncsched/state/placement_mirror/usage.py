"""One provider's capacity and usage, read fresh from Placement's database.

The overcommit guard asks this right after each claim. Through Placement's API that is one
or two more HTTP calls per claim, each a full WSGI request on Placement's own workers, which
halves the claim rate Placement can give; here it is one indexed query on a small pool of its
own (so it never waits behind a mirror refresh). Placement commits a claim before it answers
204, so a read that starts after the answer sees it. The pool, its bounded queries and its one
failure type are ``state.db.NovaDatabase``'s.
"""

from __future__ import annotations

import time

from asyncsched.state.db import NovaDatabase

# Per resource class of the provider's inventory: Placement's capacity inputs and the sum
# allocated (a class with allocations always has inventory: Placement refuses to delete it).
_USAGE = (
    "SELECT rc.name, i.total, i.reserved, i.allocation_ratio, "
    "COALESCE((SELECT SUM(a.used) FROM allocations a WHERE a.resource_provider_id = rp.id "
    "AND a.resource_class_id = i.resource_class_id), 0)::bigint "
    "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE rp.uuid = $1"
)

Capacity = dict[str, int]
Used = dict[str, int]


class ProviderUsageReader:
    """``(capacity, used)`` by class name for one provider; DatabaseUnavailable otherwise."""

    def __init__(self, url: str, *, timeout: float, pool_size: int = 4) -> None:
        self._db = NovaDatabase(
            "placement database (overcommit guard)",
            url,
            pool_size=pool_size,
            query_timeout=timeout,
            reconnect_max=timeout,
            clock=time.monotonic,
        )

    async def read(self, provider_uuid: str) -> tuple[Capacity, Used]:
        rows = await self._db.fetch(_USAGE, provider_uuid)
        capacity = {
            name: int((total - reserved) * float(ratio)) for name, total, reserved, ratio, _ in rows
        }
        used = {row[0]: int(row[4]) for row in rows if row[4]}
        return capacity, used

    async def close(self) -> None:
        await self._db.close()
