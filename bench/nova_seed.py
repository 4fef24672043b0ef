"""Seed a big cloud's nova side with COPY: services, compute nodes, host mappings, instances.

``NovaDB.add_hosts_bulk`` and ``add_instances_bulk`` write row by row (``executemany``); at
100,000 hosts and 200,000 instances in 10 cells that took most of the benchmark's set-up
(six to seven minutes on a loaded machine). These write the same rows, with the same values
(``NodeSpec`` and its defaults; an active instance as ``add_instances_bulk`` makes it), in
one COPY per table and cell.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Sequence

import asyncpg

from tests.support.nova_db import NODE_COLUMNS, CellDB, NodeSpec, NovaDB, node_values, utcnow

_SERVICE_COLUMNS = [
    "created_at",
    "updated_at",
    "host",
    "binary",
    "topic",
    "report_count",
    "disabled",
    "deleted",
    "last_seen_up",
    "forced_down",
    "version",
    "uuid",
]
_INSTANCE_COLUMNS = [
    "created_at",
    "updated_at",
    "uuid",
    "host",
    "node",
    "deleted",
    "vm_state",
    "memory_mb",
    "vcpus",
    "root_gb",
    "ephemeral_gb",
    "cleaned",
]


async def copy_hosts(db: NovaDB, cell: CellDB, specs: Sequence[NodeSpec]) -> None:
    """What ``NovaDB.add_hosts_bulk`` writes (one nova-compute service and one compute node
    per spec, the host mapped to ``cell``), by COPY. Every spec names its node uuid."""
    now = utcnow()
    conn = await asyncpg.connect(cell.dsn)
    try:
        async with conn.transaction():
            await conn.copy_records_to_table(
                "services",
                columns=_SERVICE_COLUMNS,
                records=[
                    (
                        now,
                        now,
                        s.host,
                        "nova-compute",
                        "compute",
                        1,
                        False,
                        0,
                        now,
                        False,
                        68,
                        str(uuidlib.uuid4()),
                    )
                    for s in specs
                ],
            )
            ids = {
                r["host"]: r["id"]
                for r in await conn.fetch(
                    "SELECT id, host FROM services"
                    " WHERE deleted = 0 AND \"binary\" = 'nova-compute'"
                )
            }
            await conn.copy_records_to_table(
                "compute_nodes",
                columns=[c.strip() for c in NODE_COLUMNS.split(",")],
                records=[node_values(s, ids[s.host], now) for s in specs],
            )
            await conn.execute("ANALYZE")
    finally:
        await conn.close()
    api = await asyncpg.connect(db.api_dsn)
    try:
        await api.copy_records_to_table(
            "host_mappings",
            columns=["created_at", "cell_id", "host"],
            records=[(now, cell.id, s.host) for s in specs],
        )
    finally:
        await api.close()


async def copy_instances(
    cell: CellDB, hosts: Sequence[str], per_host: int
) -> list[tuple[str, str]]:
    """``per_host`` active instances on every host of ``cell``, as ``add_instances_bulk``
    makes them (2,048 MB, 1 vCPU, 20 GB), by COPY; returns (instance uuid, host) pairs."""
    now = utcnow()
    made = [(str(uuidlib.uuid4()), h) for h in hosts for _ in range(per_host)]
    conn = await asyncpg.connect(cell.dsn)
    try:
        await conn.copy_records_to_table(
            "instances",
            columns=_INSTANCE_COLUMNS,
            records=[(now, now, u, h, h, 0, "active", 2048, 1, 20, 0, 0) for u, h in made],
        )
        await conn.execute("ANALYZE instances")
    finally:
        await conn.close()
    return made
