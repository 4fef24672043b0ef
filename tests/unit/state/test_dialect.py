"""The SQL written once in two dialects; MySQL parameters, rows and the same-second rules."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from asyncsched.conf.dsn import parse_db_url
from asyncsched.state.api import fingerprint
from asyncsched.state.db_mysql import as_rows, bind, connect_kwargs, row_type
from asyncsched.state.index import CellIndex
from asyncsched.state.readers import read_services, read_stamped
from asyncsched.state.sql import MYSQL, POSTGRES


def test_only_the_dialect_fragments_differ() -> None:
    assert MYSQL.nodes_all == POSTGRES.nodes_all  # written once
    assert "UTC_TIMESTAMP()" in MYSQL.now and "now()" in POSTGRES.now
    assert "= ANY($1::int[])" in POSTGRES.services_by_id and "IN $1" in MYSQL.services_by_id
    assert "GROUP_CONCAT" in MYSQL.sysmeta_all and "string_agg" in POSTGRES.sysmeta_all
    for q in (MYSQL, POSTGRES):
        assert "AS now" in q.api_fingerprint


def test_bind_numbers_lists_and_percent() -> None:
    sql, args = bind("SELECT x FROM t WHERE a LIKE 'image\\_%' AND b = $2 AND c IN $1", [[1, 2], 7])
    assert sql == "SELECT x FROM t WHERE a LIKE 'image\\_%%' AND b = %s AND c IN (%s, %s)"
    assert args == (7, 1, 2)
    sql, args = bind("SELECT 1 WHERE coalesce(id IN $2, false) AND x = $1", [5, []])
    assert sql == "SELECT 1 WHERE coalesce(id IN (NULL), false) AND x = %s" and args == (5,)


def test_rows_by_name_and_position() -> None:
    row = row_type(("id", "host"))((5, "h1"))
    assert row["host"] == "h1" and row[0] == 5 and tuple(row) == (5, "h1")
    assert dict(row) == {"id": 5, "host": "h1"} and row.get("nope", 1) == 1
    assert list(row.values()) == [5, "h1"] and hash(tuple(row)) == hash((5, "h1"))


def test_connect_kwargs_galera_next_address_and_socket() -> None:
    u = parse_db_url("mysql+pymysql://nova:pw@db1,db2:3307/nova?charset=utf8")
    first, second = connect_kwargs(u, 0, 5), connect_kwargs(u, 1, 5)
    assert (first["host"], first["port"]) == ("db1", 3306)
    assert (second["host"], second["port"]) == ("db2", 3307)
    assert first["autocommit"] is True and first["charset"] == "utf8"
    assert connect_kwargs(u, 2, 5)["host"] == "db1"  # round again
    s = connect_kwargs(parse_db_url("mysql://n@/nova?unix_socket=/run/m.sock"), 0, 5)
    assert s["unix_socket"] == "/run/m.sock" and "host" not in s


def test_a_recent_fingerprint_part_is_never_equal_to_the_last() -> None:
    now = datetime(2026, 11, 27, 9, 0, 10)
    row = {"now": now, "cells": "3/2026-11-27 09:00:05", "hosts": "2/2026-11-27 08:00:00/7"}
    a, b = fingerprint(row), fingerprint(row)
    assert a["cells"] != b["cells"]  # changed again within that second: read again
    assert a["hosts"] == b["hosts"] == "2/2026-11-27 08:00:00/7"


class _DB:
    def __init__(self) -> None:
        self.asked: list[list[int]] = []
        self.args: list[tuple[Any, ...]] = []
        self.sql = MYSQL

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        if sql == MYSQL.service_stamps_changed:
            self.args.append(args)
        else:
            self.asked.append(list(args[0]))
        return []


@pytest.mark.parametrize(
    ("known", "recent", "fetched"),
    [
        ("t5", True, True),  # the stamp applied, of the second already read: again
        ("t5", False, False),
        ("t4", False, True),  # another stamp
    ],
)
async def test_a_row_of_the_second_already_read_is_read_again(
    known: str, recent: bool, fetched: bool
) -> None:
    """Stamps are whole seconds on MySQL: a row whose stamp equals the one applied but is
    not older than the read that applied it (``recent``) may have changed again within that
    second."""
    index = CellIndex()
    index.service_stamps[7] = known
    db = _DB()
    await read_stamped(db, index, [(7, "t5", recent)])  # type: ignore[arg-type]
    assert db.asked == ([[7]] if fetched else [])


def test_a_zero_date_reads_as_null_not_text() -> None:
    """MariaDB stores 0000-00-00 without NO_ZERO_DATE; the driver hands it over as text."""
    when = datetime(2026, 1, 1, 9, 0, 0)
    desc = [("id", 3), ("updated_at", 12), ("host", 253)]
    rows = as_rows(desc, [(1, "0000-00-00 00:00:00", "h1"), (2, when, "0000-00-00")])
    assert rows[0]["updated_at"] is None and rows[0]["host"] == "h1"
    assert rows[1]["updated_at"] == when and rows[1]["host"] == "0000-00-00"


async def test_the_second_of_the_last_read_counts_whole() -> None:
    """The stamps read asks which stamps are of the last read's second or later: a read
    taken at .7 s (PostgreSQL's clock) counts from the whole second."""
    index = CellIndex()
    db = _DB()
    since = datetime(2026, 1, 1, 9, 0, 0)
    seen = datetime(2026, 1, 1, 9, 0, 5, 700000)
    await read_services(db, index, since, seen)  # type: ignore[arg-type]
    assert db.args == [(since, datetime(2026, 1, 1, 9, 0, 5))]
