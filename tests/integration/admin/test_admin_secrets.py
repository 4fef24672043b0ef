"""``asyncsched serve`` with secrets planted in its config, templated cell mappings, and the
issue's unbounded capacity request.

Issue #21 item 6: a ``[placement_database] connection`` with ``?password=...`` appeared in
``GET /v1/status`` and the health file. Item 10: a templated cell ``database_connection``
was dropped with an ERROR while ``/readyz`` stayed ready. The real daemon, the real
Placement, the nova databases in PostgreSQL (trust authentication, so a planted password
is sent and ignored).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from tests.support.admin_http import admin_get, wait_readyz
from tests.support.cloud import AggregatePlan, HostPlan, daemon_config, seeded_cloud
from tests.support.daemon import serving, write_config
from tests.support.net import free_port
from tests.support.nova_db import NovaDB, url_for
from tests.support.placement_server import PlacementServer
from tests.support.serve_process import ServeProcess

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

TOKEN = "admin-t0ken-secrets"
SECRETS = {
    "api": "S3cretApiDb",
    "database": "S3cretCellDb",
    "placement": "S3cretPlacementDb",
}
FLIP = 30.0


@dataclass
class Stack:
    daemon: ServeProcess
    admin: str
    health_file: Path
    db: NovaDB


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    placement_server: PlacementServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Stack]:
    tmp = tmp_path_factory.mktemp("secrets")
    hosts = [
        HostPlan(f"s{c}-{i}", c, 8, 16384, 500, aggregates=("az",)) for c in (0, 1) for i in (0, 1)
    ]
    az = [AggregatePlan("az", "az1")]
    async with seeded_cloud("asyncsched_secrets", placement_server, hosts, az, n_cells=2) as (
        db,
        _,
    ):
        # cell 2 as a nova-manage --database_connection template: filled from [database]
        cell2 = db.cells[1]
        await db.api_execute(
            "UPDATE cell_mappings SET database_connection = $1 WHERE id = $2",
            "{scheme}://{username}@{hostname}:{port}/" + cell2.dbname + "?{query}",
            cell2.id,
        )
        port = free_port()
        health_file = tmp / "health.json"
        config = daemon_config(
            transport_url="rabbit://guest:guest@127.0.0.1:5672/",
            api_url=f"{db.api_url}?password={SECRETS['api']}",
            placement=replace(placement_server.options, timeout=5.0),
            scheduler_host=f"secrets-{uuid.uuid4().hex[:8]}",
            refresh_interval=0.3,
            full_resync_interval=3600.0,
            admin_listen=f"127.0.0.1:{port}",
            health_file=str(health_file),
            capacity_max_instances=50,
        )
        conf = write_config(tmp, config, admin_token=TOKEN)
        with conf.open("a") as f:
            f.write(
                f"[database]\nconnection = {url_for(db.cells[0].dbname)}"
                f"?password={SECRETS['database']}\n"
                f"[placement_database]\nconnection = {url_for(placement_server.db_name)}"
                f"?password={SECRETS['placement']}\n"
            )
        async with serving(conf) as daemon:
            yield Stack(daemon, f"http://127.0.0.1:{port}", health_file, db)


async def get(stack: Stack, path: str) -> tuple[int, str]:
    return await admin_get(stack.admin, path, TOKEN)


async def wait_ready(stack: Stack, want: int, contains: str = "") -> str:
    return await wait_readyz(stack.admin, TOKEN, want, contains, FLIP)


def assert_no_secret(text: str, where: str) -> None:
    for name, secret in SECRETS.items():
        assert secret not in text, f"the {name} password is in {where}"


async def test_status_and_health_file_mask_every_planted_secret(stack: Stack) -> None:
    await wait_ready(stack, 200)
    status, body = await get(stack, "/v1/status")
    assert status == 200
    doc: dict[str, Any] = json.loads(body)
    mirror = doc["components"]["placement_mirror"]
    assert mirror["serving"] is True  # the planted password really was in use
    assert mirror["database"].endswith("?password=***")
    assert_no_secret(body, "/v1/status")
    text = stack.health_file.read_text()  # written before READY=1, then every refresh
    assert "placement_mirror" in text
    assert_no_secret(text, "the health file")
    assert_no_secret(stack.daemon.stderr(), "the log")


async def test_a_templated_cell_is_filled_and_its_hosts_loaded(stack: Stack) -> None:
    await wait_ready(stack, 200)
    _, body = await get(stack, "/v1/status")
    cells = json.loads(body)["components"]["hoststate"]["cells"]
    cell2 = cells[stack.db.cells[1].uuid]
    assert cell2["loaded"] is True and cell2["hosts"] == 2, cell2


async def test_a_template_that_cannot_be_filled_makes_readyz_name_the_cell(stack: Stack) -> None:
    await wait_ready(stack, 200)
    bad_uuid = str(uuid.uuid4())
    await stack.db.api_execute(
        "INSERT INTO cell_mappings (created_at, uuid, name, transport_url, database_connection,"
        " disabled) VALUES (now(), $1, 'cell-broken', 'rabbit://', $2, false)",
        bad_uuid,
        "{scheme}://{username}:{no_such_field}@{hostname}/x",
    )
    try:
        body = await wait_ready(stack, 503, "cell cell-broken")
        assert "{no_such_field}" in body and "cannot be scheduled" in body
        assert_no_secret(body, "/readyz")
    finally:
        await stack.db.api_execute("DELETE FROM cell_mappings WHERE uuid = $1", bad_uuid)
    await wait_ready(stack, 200)


async def test_the_issue_s_capacity_request_is_answered_bounded(stack: Stack) -> None:
    """Issue #21 item 5: ``vcpus=0&ram=1&disk=0`` placed 618,496 scratch instances."""
    await wait_ready(stack, 200)
    status, body = await get(stack, "/v1/capacity?vcpus=0&ram=1&disk=0")
    assert status == 200, body
    out = json.loads(body)
    assert out["total"] == 50 and "capacity_max_instances" in out["bounded"]
