"""Test databases dropped off the test's path, all gone by the end of the session.

PostgreSQL's ``DROP DATABASE`` forces an immediate checkpoint and waits for it: it flushes
every dirty buffer of the whole server, so its cost is set by what everything else on the
server wrote lately, not by the database dropped (0.1 s on a quiet server, 11 s beside a bulk
load). A test's teardown hands its database names to :func:`drop_later` and goes on; one
thread per process drops them in order, ending the sessions left on each first.
:func:`drain` (called at the end of the pytest session, ``tests/conftest.py``, and at exit)
waits until every name handed over is dropped, so a run still leaves nothing behind.
"""

from __future__ import annotations

import atexit
import queue
import threading
from collections.abc import Iterable

from tests.support.pg_admin import admin_cursor

_names: queue.Queue[str] = queue.Queue()
_lock = threading.Lock()
_worker: threading.Thread | None = None


def drop_now(names: Iterable[str]) -> None:
    """End the sessions on each database and drop it, here and now (autocommit)."""
    with admin_cursor() as cur:
        for name in names:
            cur.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            cur.execute(f'DROP DATABASE IF EXISTS "{name}"')


def drop_later(names: Iterable[str]) -> None:
    """Queue ``names`` for the dropping thread (started on first use) and return at once."""
    global _worker
    for name in names:
        _names.put(name)
    with _lock:
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_run, name="pg-drop", daemon=True)
            _worker.start()


def drain() -> None:
    """Wait until every database handed to :func:`drop_later` is dropped."""
    _names.join()


def _run() -> None:
    while True:
        name = _names.get()
        try:
            drop_now([name])
        except Exception as exc:  # a failed drop must not end the thread
            print(f"pg_drop: {name} not dropped: {exc}")
        finally:
            _names.task_done()


atexit.register(drain)
