"""A Galera node that goes away mid-refresh (issue #25): the cell's URL names two addresses of
the real MariaDB, each behind its own TCP proxy; cutting the first is a node gone. The cache
serves what it holds (marked stale), reconnects to the next address and catches up."""

from __future__ import annotations

import asyncio
import logging

import pytest

from asyncsched.state.cache import HostStateCache
from tests.support.nova_db import NodeSpec
from tests.support.nova_db_mysql import MYSQL_HOST, MYSQL_PORT, MysqlNovaDB
from tests.support.tcp_proxy import TcpProxy


async def test_a_node_gone_mid_refresh_fails_over_to_the_next_address(
    mysql_db: MysqlNovaDB, caplog: pytest.LogCaptureFixture
) -> None:
    db = mysql_db
    c1, c2 = db.cells
    a = await db.add_host(c1, NodeSpec(host="g-a"))
    await db.add_host(c2, NodeSpec(host="g-b"))
    node1 = TcpProxy(MYSQL_HOST, MYSQL_PORT).start()
    node2 = TcpProxy(MYSQL_HOST, MYSQL_PORT).start()
    try:
        url = f"mysql+pymysql://root@{MYSQL_HOST}:{node1.port},{MYSQL_HOST}:{node2.port}"
        await db.api_execute(
            "UPDATE cell_mappings SET database_connection = $1 WHERE id = $2",
            f"{url}/{c1.dbname}?charset=utf8",
            c1.id,
        )
        cfg = db.config(refresh_interval=0.1, refresh_jitter=0.0, db_reconnect_max=0.2)
        with caplog.at_level(logging.WARNING, logger="asyncsched.state.db"):
            async with HostStateCache(cfg) as cache:
                hs = cache.get_by_uuid(a)
                assert hs is not None and hs.free_ram_mb > 0
                await asyncio.to_thread(node1.cut)  # the node the pool is on goes away
                await db.update_compute_node(c1, a, free_ram_mb=4242)
                for _ in range(200):  # the probe goes to the next address, then a full pass
                    if hs.free_ram_mb == 4242 and not cache.health()["stale"]:
                        break
                    assert cache.get_by_uuid(a) is hs  # served from the cache meanwhile
                    await asyncio.sleep(0.05)
                assert hs.free_ram_mb == 4242 and not cache.health()["stale"]
                assert f":{node2.port}" in cache.health()["cells"][c1.uuid]["address"]
        gone = [r for r in caplog.records if "unavailable, serving cached state" in r.message]
        assert gone and f":{node1.port}" in gone[0].getMessage()
    finally:
        node1.close()
        node2.close()
