"""The mirror's allocations after many changes between two refreshes, against Placement's
own API: deletes (which move no generation), moves (nova's POST /allocations emptying the
migration's consumer), replaced amounts, a consumer made and deleted unseen, a late commit
below ids already seen; every view must equal the API's after one refresh, and the refresh
must have read only the rows that moved."""

from __future__ import annotations

import random
import uuid as uuidlib
from typing import Any

import asyncpg
import pytest

from asyncsched.state.placement_mirror import PlacementMirror
from tests.integration.candidates.conftest import ReadOnlyRole
from tests.integration.candidates.views import api_view, mirror_view
from tests.support.placement_server import PG_HOST, PG_USER, PlacementServer, Seeder

pytestmark = pytest.mark.asyncio(loop_scope="module")


def body(allocs: dict[str, dict[str, int]], generation: int | None) -> dict[str, Any]:
    return {
        "allocations": {rp: {"resources": r} for rp, r in allocs.items()},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": generation,
    }


async def put(s: Seeder, consumer: str, allocs: dict[str, dict[str, int]]) -> None:
    _, got = await s.call("GET", f"/allocations/{consumer}")
    status, out = await s.call(
        "PUT", f"/allocations/{consumer}", body(allocs, got.get("consumer_generation"))
    )
    assert status == 204, out


async def same_as_api(s: Seeder, mirror: PlacementMirror) -> None:
    await mirror.refresh()
    assert mirror.state is not None
    assert mirror_view(mirror.state) == await api_view(s)


async def test_many_changes_between_refreshes_match_placements_api(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    rng = random.Random(24)
    async with placement.seeder() as s:
        hosts = await s.compute_nodes(12, prefix="moves", vcpus=64)
        small = {"VCPU": 1, "MEMORY_MB": 128}
        consumers = {str(uuidlib.uuid4()): rng.choice(hosts) for _ in range(60)}
        for c, h in consumers.items():
            await put(s, c, {h: small})
        mirror = PlacementMirror(ro_role.url, interval=3600, max_age=1e9, query_timeout=10)
        await mirror.start()
        try:
            assert mirror_view(mirror.state) == await api_view(s)  # type: ignore[arg-type]
            for _ in range(3):
                live = sorted(consumers)
                deleted = rng.sample(live, 8)
                for c in deleted:  # DELETE: no generation moves
                    status, _ = await s.call("DELETE", f"/allocations/{c}")
                    assert status == 204
                    del consumers[c]
                for c in rng.sample(sorted(consumers), 6):  # other hosts, other amounts
                    consumers[c] = rng.choice(hosts)
                    await put(s, c, {consumers[c]: {"VCPU": rng.randint(1, 3), "MEMORY_MB": 64}})
                for c in rng.sample(sorted(consumers), 3):  # nova's move: POST, source emptied
                    target, migration = str(uuidlib.uuid4()), c
                    _, got = await s.call("GET", f"/allocations/{c}")
                    status, out = await s.call(
                        "POST",
                        "/allocations",
                        {
                            migration: body({}, got["consumer_generation"]),
                            target: body({rng.choice(hosts): small}, None),
                        },
                    )
                    assert status == 204, out
                    del consumers[c]
                    consumers[target] = ""
                unseen = str(uuidlib.uuid4())  # made and deleted between two refreshes
                await put(s, unseen, {hosts[0]: small})
                assert (await s.call("DELETE", f"/allocations/{unseen}"))[0] == 204
                for _ in range(10):  # new ones
                    c = str(uuidlib.uuid4())
                    consumers[c] = rng.choice(hosts)
                    await put(s, c, {consumers[c]: small})
                await same_as_api(s, mirror)
                moved = mirror.health()["last_allocation_rows_moved"]
                assert 0 < moved <= 2 * (8 + 2 * 6 + 2 * 3 + 10)  # rows that moved, not all
            assert mirror.health()["refresh_failures"] == 0
        finally:
            await mirror.close()


async def test_a_late_commit_below_ids_already_seen_is_found(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    """A writer takes an allocation id, others commit higher ids and a refresh sees them,
    then the first commits: its row is below every id seen, and the next refresh finds it
    (PostgreSQL's serial ids are not committed in order)."""
    async with placement.seeder() as s:
        (host,) = await s.compute_nodes(1, prefix="late", vcpus=64)
        mirror = PlacementMirror(ro_role.url, interval=3600, max_age=1e9, query_timeout=10)
        await mirror.start()
        late = await asyncpg.connect(host=PG_HOST, user=PG_USER, database=placement.db_name)
        try:
            rp_id = mirror.state.by_uuid[host]  # type: ignore[union-attr]
            vcpu = await late.fetchval("SELECT id FROM resource_classes WHERE name = 'VCPU'")
            tx = late.transaction()
            await tx.start()
            await late.execute(
                "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, "
                "used, created_at) VALUES ($1, $2, $3, 5, now())",
                rp_id,
                str(uuidlib.uuid4()),
                vcpu,
            )
            for _ in range(3):
                await put(s, str(uuidlib.uuid4()), {host: {"VCPU": 1}})
            await same_as_api(s, mirror)
            assert mirror_view(mirror.state)[host]["usages"]["VCPU"] == 3  # type: ignore[arg-type]
            await tx.commit()
            await same_as_api(s, mirror)
            assert mirror_view(mirror.state)[host]["usages"]["VCPU"] == 8  # type: ignore[arg-type]
        finally:
            await late.close()
            await mirror.close()
