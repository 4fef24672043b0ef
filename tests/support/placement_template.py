"""Placement's PostgreSQL schema made once and copied: a Placement starts without a db sync.

``placement-manage db sync`` costs every test Placement a Python start and the alembic
migrations (1.4 s of CPU, 9 s at load 13). The first Placement of a machine syncs a template
database instead, ``asyncsched_tpl_placement_<digest of the migration files>`` (kept between
runs like MariaDB's nova templates in ``nova_db_mysql``, re-made when Placement's migrations
change), and every Placement database after it is a ``CREATE DATABASE ... TEMPLATE`` copy of
it, which PostgreSQL makes in a fraction of a second. A session-level advisory lock makes the
xdist workers and other runs on the machine wait for the one that builds it. The template
takes no connections (``ALLOW_CONNECTIONS false``, so no autovacuum session either): a copy is
never refused for "source database is being accessed by other users". Any failure falls back
to a plain database and its own db sync.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg2

from tests.support.pg_admin import admin_cursor, pg_exec

PREFIX = "asyncsched_tpl_placement_"
_LOCK_KEY = 0x706C6163  # "plac": the advisory lock every template builder takes

LOG = logging.getLogger(__name__)


def template_name() -> str:
    """The template of the installed Placement's migrations (their file names' digest)."""
    spec = importlib.util.find_spec("placement")
    assert spec is not None and spec.submodule_search_locations
    versions = Path(spec.submodule_search_locations[0]) / "db/sqlalchemy/alembic/versions"
    names = "\n".join(sorted(p.name for p in versions.glob("*.py")))
    return PREFIX + hashlib.blake2b(names.encode(), digest_size=6).hexdigest()


def create_synced(name: str, sync: Callable[[str], None]) -> None:
    """Create database ``name`` with Placement's schema; ``sync(db)`` db-syncs database ``db``.

    A copy of the template (built with ``sync`` first if there is none), else a plain database
    synced on its own.
    """
    try:
        template = _ensure_template(sync)
        pg_exec(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        return
    except psycopg2.Error as exc:
        LOG.warning("Placement template not used for %s (%s): db sync instead", name, exc)
    pg_exec(f'CREATE DATABASE "{name}"')
    sync(name)


def _ensure_template(sync: Callable[[str], None]) -> str:
    template = template_name()
    with admin_cursor() as cur:  # its session's end releases the advisory lock
        cur.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (template,))
        if cur.fetchone() is None:
            _build(cur, template, sync)
    return template


def _build(cur: psycopg2.extensions.cursor, template: str, sync: Callable[[str], None]) -> None:
    """Sync a uuid-named database, then rename it into place (so no half-made template)."""
    build = f"{template}_b{uuid.uuid4().hex[:8]}"
    cur.execute(f'CREATE DATABASE "{build}"')
    try:
        sync(build)
        cur.execute(f'ALTER DATABASE "{build}" RENAME TO "{template}"')
    except BaseException:
        cur.execute(f'DROP DATABASE IF EXISTS "{build}"')
        raise
    cur.execute(f'ALTER DATABASE "{template}" WITH ALLOW_CONNECTIONS false IS_TEMPLATE true')
