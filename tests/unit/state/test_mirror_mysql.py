"""The mirror's MySQL/MariaDB answers: ``GROUP_CONCAT`` texts read into the same arrays as
PostgreSQL's binary ones (the bitmap words' unsigned 64 bits as the same bits signed), a text
cut short or not made of numbers refused, and each dialect's statements complete."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pytest

from asyncsched.state.placement_mirror import sql, sql_mysql
from asyncsched.state.placement_mirror.allocations import Bitmaps
from asyncsched.state.placement_mirror.binary import ArrayFormatError
from asyncsched.state.placement_mirror.connection import MysqlMirrorConnection, _numbers
from asyncsched.state.placement_mirror.statements import BY_DIALECT, MYSQL, POSTGRESQL


class Answer:
    """An asyncmy connection that answers every query with ``rows``."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def cursor(self) -> Answer:
        return self

    async def __aenter__(self) -> Answer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def execute(self, query: str, args: Any = None) -> None:
        return None

    async def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows


def concat(values: list[int]) -> str | None:
    return ",".join(str(v) for v in values) or None


async def test_bitmaps_from_mysql_are_the_id_set_as_postgresql_sends_it() -> None:
    rng = random.Random(3)
    ids = sorted({*rng.sample(range(1, 50_000), 3000), 63, 64, 127, 128})
    words: dict[int, int] = {}
    for i in ids:
        words[i >> 6] = words.get(i >> 6, 0) | (1 << (i & 63))  # MySQL: unsigned
    keys = sorted(words)
    text = concat([v for k in keys for v in (k, words[k])])
    conn = MysqlMirrorConnection(Answer([(len(keys), text)]))
    got = Bitmaps.checked(*await conn.arrays(MYSQL.allocation_bitmaps, (4, 8)))
    assert got.same(Bitmaps.of_ids(np.array(ids, dtype=np.int64)))
    assert any(v >= 1 << 63 for v in words.values())  # the sign bit was exercised


async def test_an_answer_is_read_whole_and_checked_against_its_count() -> None:
    conn = MysqlMirrorConnection(Answer([(3, "1,7,2,7,5,9")]))
    a, b = await conn.arrays(MYSQL.allocation_bitmaps, (4, 8))
    assert a.tolist() == [1, 2, 5] and b.tolist() == [7, 7, 9]
    empty = MysqlMirrorConnection(Answer([(0, None)]))
    assert [len(x) for x in await empty.arrays(MYSQL.allocation_bitmaps, (4, 8))] == [0, 0]
    cut = MysqlMirrorConnection(Answer([(4, "1,7,2,7,5,9")]))  # group_concat_max_len
    with pytest.raises(ArrayFormatError, match="shorter than its count"):
        await cut.arrays(MYSQL.allocation_bitmaps, (4, 8))
    rows = MysqlMirrorConnection(Answer([(1, 10, 0, 2), (2, 10, 1, 512)]))
    got = await rows.arrays(MYSQL.allocations_all, (4, 4, 4, 4))
    assert [x.tolist() for x in got] == [[1, 2], [10, 10], [0, 1], [2, 512]]


@pytest.mark.parametrize("text", ["1,,2", "1,x", "1;2", "1.5,2"])
def test_a_text_that_is_not_a_list_of_numbers_is_refused(text: str) -> None:
    with pytest.raises(ArrayFormatError):
        _numbers(text)


def test_each_dialect_has_every_statement_and_postgresqls_are_sql_pys() -> None:
    assert set(BY_DIALECT) == {"postgresql", "mysql"}
    for stmt in (POSTGRESQL, MYSQL):
        assert all(dataclasses.astuple(stmt))
    assert POSTGRESQL.provider_prints == sql.PROVIDER_PRINTS
    assert POSTGRESQL.allocation_bitmaps == sql.ALLOCATION_BITMAPS
    assert MYSQL.provider_usage == sql_mysql.PROVIDER_USAGE
    assert "ANY(" not in "".join(dataclasses.astuple(MYSQL))
    assert "array_send" not in "".join(dataclasses.astuple(MYSQL))
