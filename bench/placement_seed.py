"""Seed a big cloud straight into Placement's database (COPY), as Placement itself stores it.

Seeding 10,000 or 100,000 providers through Placement's API takes many minutes; COPY takes
seconds. Placement's own API must then read the providers back unchanged:
:func:`verify_readback` compares a sample through the API with what was written.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg

from tests.support.placement_server import Seeder

TRAITS = ("OWNER_NOVA", "HW_CPU_X86_AVX2")
SIZES = [  # vcpus, memory MB, disk GB
    (32, 131072, 2000),
    (48, 196608, 3000),
    (64, 262144, 4000),
    (96, 327680, 6000),
]


@dataclass(frozen=True, slots=True)
class SeededProvider:
    uuid: str
    name: str
    vcpus: int
    memory_mb: int
    disk_gb: int

    def inventories(self) -> dict[str, dict[str, Any]]:
        return {
            "VCPU": _inv(self.vcpus, 0, 16.0),
            "MEMORY_MB": _inv(self.memory_mb, 512, 1.5),
            "DISK_GB": _inv(self.disk_gb, 0, 1.0),
        }


def _inv(total: int, reserved: int, ratio: float) -> dict[str, Any]:
    return {
        "total": total,
        "reserved": reserved,
        "min_unit": 1,
        "max_unit": total,
        "step_size": 1,
        "allocation_ratio": ratio,
    }


def plan(count: int, *, prefix: str = "bench", seed: int = 7) -> list[SeededProvider]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        v, m, d = SIZES[rng.randrange(len(SIZES))]
        out.append(
            SeededProvider(
                str(uuidlib.UUID(int=rng.getrandbits(128))), f"{prefix}-{i:06d}", v, m, d
            )
        )
    return out


async def seed(dsn: str, providers: list[SeededProvider]) -> None:
    """COPY providers, inventories and traits into Placement's tables (schema already synced,
    standard resource classes and traits already loaded by Placement at start)."""
    conn = await asyncpg.connect(dsn)
    try:
        classes = {
            r["name"]: r["id"] for r in await conn.fetch("SELECT id, name FROM resource_classes")
        }
        traits = {r["name"]: r["id"] for r in await conn.fetch("SELECT id, name FROM traits")}
        missing = {"VCPU", "MEMORY_MB", "DISK_GB"} - set(classes) or set(TRAITS) - set(traits)
        if missing:
            raise RuntimeError(f"Placement has not synced {missing} yet")
        first = int(await conn.fetchval("SELECT COALESCE(MAX(id), 0) FROM resource_providers")) + 1
        now = datetime.now(UTC).replace(tzinfo=None)
        async with conn.transaction():
            await conn.copy_records_to_table(
                "resource_providers",
                columns=[
                    "id",
                    "uuid",
                    "name",
                    "generation",
                    "root_provider_id",
                    "created_at",
                    "updated_at",
                ],
                records=[
                    (first + i, p.uuid, p.name, 1, first + i, now, now)
                    for i, p in enumerate(providers)
                ],
            )
            await conn.copy_records_to_table(
                "inventories",
                columns=[
                    "resource_provider_id",
                    "resource_class_id",
                    "total",
                    "reserved",
                    "min_unit",
                    "max_unit",
                    "step_size",
                    "allocation_ratio",
                    "created_at",
                    "updated_at",
                ],
                records=[
                    (
                        first + i,
                        classes[rc],
                        v["total"],
                        v["reserved"],
                        v["min_unit"],
                        v["max_unit"],
                        v["step_size"],
                        v["allocation_ratio"],
                        now,
                        now,
                    )
                    for i, p in enumerate(providers)
                    for rc, v in p.inventories().items()
                ],
            )
            await conn.copy_records_to_table(
                "resource_provider_traits",
                columns=["resource_provider_id", "trait_id", "created_at", "updated_at"],
                records=[
                    (first + i, traits[t], now, now) for i in range(len(providers)) for t in TRAITS
                ],
            )
            await conn.execute(
                "SELECT setval(pg_get_serial_sequence('resource_providers', 'id'), $1)",
                first + len(providers) - 1,
            )
            await conn.execute("ANALYZE")
    finally:
        await conn.close()


async def verify_readback(
    seeder: Seeder, providers: list[SeededProvider], sample: int = 200
) -> int:
    """Placement's API shows a random sample exactly as written; returns how many were checked."""
    rng = random.Random(1)
    chosen = rng.sample(providers, min(sample, len(providers)))
    for p in chosen:
        status, rp = await seeder.call("GET", f"/resource_providers/{p.uuid}")
        assert status == 200, (p, rp)
        assert rp["name"] == p.name and rp["generation"] == 1 and rp["root_provider_uuid"] == p.uuid
        _, inv = await seeder.call("GET", f"/resource_providers/{p.uuid}/inventories")
        got = {
            rc: {k: v for k, v in i.items() if k != "resource_provider_generation"}
            for rc, i in inv["inventories"].items()
        }
        assert got == p.inventories(), (p, got)
        _, tr = await seeder.call("GET", f"/resource_providers/{p.uuid}/traits")
        assert sorted(tr["traits"]) == sorted(TRAITS), tr
    return len(chosen)


#: what one seeded instance holds (``NovaDB.add_instances_bulk``'s instance rows)
INSTANCE = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


async def seed_allocations(dsn: str, consumers: list[tuple[str, str]]) -> int:
    """COPY one allocation of :data:`INSTANCE` per (consumer uuid, provider uuid) into
    Placement's tables as its ``PUT /allocations`` stores them: one project and user, a
    ``consumers`` row (generation 1) and a row per class in ``allocations``. Returns the
    allocation rows written."""
    conn = await asyncpg.connect(dsn)
    try:
        classes = {
            r["name"]: r["id"] for r in await conn.fetch("SELECT id, name FROM resource_classes")
        }
        rp = {
            r["uuid"]: r["id"] for r in await conn.fetch("SELECT id, uuid FROM resource_providers")
        }
        now = datetime.now(UTC).replace(tzinfo=None)
        async with conn.transaction():
            project = await conn.fetchval(
                "INSERT INTO projects (external_id, created_at, updated_at) "
                "VALUES ('bench-project', $1, $1) RETURNING id",
                now,
            )
            user = await conn.fetchval(
                "INSERT INTO users (external_id, created_at, updated_at) "
                "VALUES ('bench-user', $1, $1) RETURNING id",
                now,
            )
            await conn.copy_records_to_table(
                "consumers",
                columns=["uuid", "project_id", "user_id", "generation", "created_at", "updated_at"],
                records=[(c, project, user, 1, now, now) for c, _ in consumers],
            )
            rows = [
                (rp[p], c, classes[rc], n, now, now)
                for c, p in consumers
                for rc, n in INSTANCE.items()
            ]
            await conn.copy_records_to_table(
                "allocations",
                columns=[
                    "resource_provider_id",
                    "consumer_id",
                    "resource_class_id",
                    "used",
                    "created_at",
                    "updated_at",
                ],
                records=rows,
            )
            await conn.execute("ANALYZE")
        return len(rows)
    finally:
        await conn.close()


async def verify_allocations(
    seeder: Seeder, consumers: list[tuple[str, str]], sample: int = 100
) -> int:
    """Placement's API shows a random sample of seeded consumers' allocations as written,
    and their providers' usages as the sum of the seeded ones; returns how many checked."""
    rng = random.Random(2)
    per_rp: dict[str, int] = {}
    for _, p in consumers:
        per_rp[p] = per_rp.get(p, 0) + 1
    chosen = rng.sample(consumers, min(sample, len(consumers)))
    for c, p in chosen:
        status, got = await seeder.call("GET", f"/allocations/{c}")
        assert status == 200 and got["allocations"] == {
            p: {"resources": INSTANCE, "generation": got["allocations"][p]["generation"]}
        }, got
        _, usages = await seeder.call("GET", f"/resource_providers/{p}/usages")
        assert usages["usages"] == {rc: n * per_rp[p] for rc, n in INSTANCE.items()}, usages
    return len(chosen)
