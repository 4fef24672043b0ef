"""The overcommit guard's usage query in both dialects against the real Placement's database
(issue #25): on PostgreSQL and on MariaDB (placement-manage's schema), what the query reads
(``Queries.provider_usage`` through ``NovaDatabase``) is what Placement's API says."""

from __future__ import annotations

import time
import uuid as uuidlib
from collections.abc import Iterator

import pytest

from asyncsched.placement.client import PlacementClient
from asyncsched.placement.usage import ProviderUsage
from asyncsched.state.db import NovaDatabase
from tests.support.nova_db import BACKENDS, Backend
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=BACKENDS)
def placement(request: pytest.FixtureRequest) -> Iterator[PlacementServer]:
    backend: Backend = request.param
    with PlacementServer(workers=1, db_backend=backend) as server:
        yield server


async def test_the_usage_query_reads_what_placements_api_says(placement: PlacementServer) -> None:
    db = NovaDatabase(
        "placement",
        placement.db_url,
        pool_size=1,
        query_timeout=10,
        reconnect_max=1,
        clock=time.monotonic,
    )
    async with PlacementClient(placement.options) as client:
        try:
            async with placement.seeder() as s:
                rp = await s.compute_node(
                    f"usage-{uuidlib.uuid4().hex[:8]}",
                    vcpus=6,
                    memory_mb=3000,
                    cpu_allocation_ratio=2.5,
                )
            ar = {"allocations": {rp: {"resources": {"VCPU": 4, "MEMORY_MB": 700}}}}
            assert await client.claim(str(uuidlib.uuid4()), ar, project_id="p", user_id="u")
            rows = await db.fetch(db.sql.provider_usage, [rp, str(uuidlib.uuid4())])
            capacity = {
                r[1]: int((int(r[2]) - int(r[3])) * float(r[4])) for r in rows if r[0] == rp
            }
            used = {r[1]: int(r[5]) for r in rows if int(r[5])}
            assert ProviderUsage(capacity, used) == await client.provider_usage(rp)
            assert used == {"VCPU": 4, "MEMORY_MB": 700}
            assert await db.fetch(db.sql.provider_usage, []) == []  # no provider asked
        finally:
            await db.close()
