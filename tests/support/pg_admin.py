"""The test PostgreSQL's superuser connection: one place for the address and autocommit.

``CREATE``/``DROP DATABASE`` and role changes cannot run inside a transaction, so every admin
statement of the test support runs through :func:`admin_cursor` (autocommit, closed after).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg2

PG_HOST = "127.0.0.1"
PG_USER = "root"


@contextmanager
def admin_cursor(db: str = "postgres") -> Iterator[Any]:
    """An autocommit cursor of the superuser on database ``db``, its connection closed after."""
    conn = psycopg2.connect(host=PG_HOST, user=PG_USER, dbname=db)
    try:
        conn.autocommit = True
        with conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


def pg_exec(sql: str, db: str = "postgres") -> None:
    """Run ``sql`` as the superuser in database ``db``, autocommit."""
    with admin_cursor(db) as cur:
        cur.execute(sql)
