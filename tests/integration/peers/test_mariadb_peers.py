"""The MariaDB peers themselves (issue #25): each fixture really made its schema on MariaDB.

* the real Placement on MariaDB: ``placement-manage db sync`` made Placement's tables in a
  MariaDB database of its own, and a provider written through Placement's API is a row there;
* nova's databases on MariaDB (``nova_db`` with ``db_backend = "mysql"``): the API, cell0 and
  cell databases are on MariaDB, each table is the one ``nova-manage`` made (the template's
  ``SHOW CREATE TABLE``, column for column), and the seeding helpers write nova's rows there.
"""

from __future__ import annotations

import re
import uuid as uuidlib
from typing import Any

import pytest

from tests.support import mysql
from tests.support.nova_db import NodeSpec, NovaDB
from tests.support.nova_db_mysql import TEMPLATE
from tests.support.placement_server import PlacementServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.parametrize("db_backend", ["mysql"], scope="module"),
]


def tables_of(db: str) -> dict[str, str]:
    """Table name -> its DDL with the database-specific parts (auto-increment) left out."""
    out: dict[str, str] = {}
    with mysql.admin(db) as cur:
        cur.execute(
            "SELECT table_name AS t FROM information_schema.tables"
            " WHERE table_schema = %s AND table_type = 'BASE TABLE'",
            (db,),
        )
        for row in list(cur.fetchall()):
            cur.execute(f"SHOW CREATE TABLE {mysql.quote(row['t'])}")
            ddl = str(cur.fetchone()["Create Table"])
            out[str(row["t"])] = re.sub(r" AUTO_INCREMENT=\d+", "", ddl)
    return out


def columns(ddl: str) -> list[str]:
    return [line.strip() for line in ddl.splitlines() if line.strip().startswith("`")]


def one(db: str, sql: str, *args: Any) -> dict[str, Any]:
    with mysql.admin(db) as cur:
        cur.execute(sql, args)
        row = cur.fetchone()
    assert row is not None, sql
    return dict(row)


async def test_placement_made_its_schema_on_mariadb(placement_server: PlacementServer) -> None:
    assert placement_server.db_url.startswith("mysql+pymysql://")
    tables = tables_of(placement_server.db_name)
    assert {
        "resource_providers",
        "inventories",
        "allocations",
        "consumers",
        "traits",
        "resource_provider_traits",
        "placement_aggregates",
        "resource_provider_aggregates",
        "alembic_version",
    } <= set(tables)
    assert "ENGINE=InnoDB" in tables["allocations"]
    async with placement_server.seeder() as s:
        rp = await s.compute_node(f"mdb-{uuidlib.uuid4().hex[:6]}", vcpus=8, memory_mb=4096)
    row = one(
        placement_server.db_name,
        "SELECT rp.name, i.total FROM resource_providers rp JOIN inventories i"
        " ON i.resource_provider_id = rp.id JOIN resource_classes rc"
        " ON rc.id = i.resource_class_id WHERE rp.uuid = %s AND rc.name = 'VCPU'",
        rp,
    )
    assert row["name"].startswith("mdb-") and row["total"] == 8


async def test_nova_databases_are_nova_manages_schema_on_mariadb(nova_db: NovaDB) -> None:
    assert nova_db.api_url.startswith("mysql+pymysql://")
    api = tables_of(nova_db.api_dbname)
    template_api = tables_of(f"{TEMPLATE}_api")
    assert set(api) == set(template_api)
    assert {"cell_mappings", "host_mappings", "aggregates", "aggregate_hosts"} <= set(api)
    for name, ddl in api.items():
        assert columns(ddl) == columns(template_api[name]), name
    template_cell = tables_of(f"{TEMPLATE}_cell")
    assert nova_db.cell0 is not None
    for cell in [nova_db.cell0, *nova_db.cells]:
        found = tables_of(cell.dbname)
        assert set(found) == set(template_cell), cell.name
        for name in ("compute_nodes", "services", "instances", "instance_system_metadata"):
            assert columns(found[name]) == columns(template_cell[name]), (cell.name, name)
    # nova-manage's own migrations made the template: alembic's head is recorded there
    assert one(f"{TEMPLATE}_api", "SELECT version_num FROM alembic_version")["version_num"]
    assert one(f"{TEMPLATE}_cell", "SELECT version_num FROM alembic_version")["version_num"]

    cell = nova_db.cells[0]
    node = await nova_db.add_host(cell, NodeSpec(host="mdb-h1", vcpus=24))
    inst = await nova_db.add_instance(cell, "mdb-h1", image_props={"hw_disk_bus": "scsi"})
    await nova_db.add_aggregate("mdb-az", ["mdb-h1"], {"availability_zone": "mdb-az"})
    row = one(
        cell.dbname,
        "SELECT cn.vcpus, s.`binary` AS b, i.uuid AS inst FROM compute_nodes cn"
        " JOIN services s ON s.id = cn.service_id"
        " JOIN instances i ON i.node = cn.hypervisor_hostname"
        " WHERE cn.uuid = %s",
        node,
    )
    assert row == {"vcpus": 24, "b": "nova-compute", "inst": inst}
    mapped = one(nova_db.api_dbname, "SELECT cell_id FROM host_mappings WHERE host = 'mdb-h1'")
    assert mapped["cell_id"] == cell.id
