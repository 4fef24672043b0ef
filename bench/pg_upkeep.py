"""PostgreSQL's upkeep as a production cloud has it, for the big benchmarks.

The test machines' cluster runs with ``autovacuum = off`` (its ``conf.d/90-ci.conf``), so a
table seeded by COPY keeps an empty visibility map (an index-only scan fetches every heap
row) and a table updated by heartbeats only grows. PostgreSQL's default, and any production
Placement's and nova's, is ``autovacuum = on``: after a bulk load its workers vacuum and
analyze the table (PostgreSQL 13 and later count inserts too), and they keep up with updated
rows. :func:`production_upkeep` turns autovacuum on for the run (``ALTER SYSTEM``, reloaded,
reset after), and :func:`vacuum_seeded` does at once what it would do after the seed, so a
run does not wait a naptime for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import asyncpg

from tests.support.pg_admin import pg_exec


def _alter(statement: str) -> None:
    """An ``ALTER SYSTEM`` statement, in effect at once (the configuration reloaded)."""
    pg_exec(statement)
    pg_exec("SELECT pg_reload_conf()")


@contextmanager
def production_upkeep(on: bool = True) -> Iterator[None]:
    """Autovacuum on (``on``) for the block, the cluster's own setting back after it."""
    if not on:
        yield
        return
    _alter("ALTER SYSTEM SET autovacuum = on")
    try:
        yield
    finally:
        _alter("ALTER SYSTEM RESET autovacuum")


async def vacuum_seeded(dsns: Iterable[str]) -> None:
    """``VACUUM ANALYZE`` every table of each database: autovacuum's work after a bulk load."""
    for dsn in dsns:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute("VACUUM ANALYZE")
        finally:
            await conn.close()
