"""Session-wide test ordering: the longest test files first.

``make test`` runs the integration phase on pytest-xdist workers, one whole test file per worker
at a time, taken in collection order (``--dist loadfile --no-loadscope-reorder``). A long file
that starts last keeps one worker busy while the others have nothing left, so the files known to
take longest go first (longest processing time first); every other test keeps pytest's order.
A one-process run (``TEST_WORKERS=0``, or plain ``pytest``) sees the same order. Durations per
file: docs/benchmarks.md, "Test suite".
"""

from __future__ import annotations

import pytest

#: Path prefixes, longest first (measured: docs/benchmarks.md, "Test suite"). A file not named
#: here runs after these, in pytest's order; those left are each under two minutes.
LONGEST_FIRST = (
    "tests/integration/nova/",  # the nova 34 control plane: 26 scenarios x 3 schedulers
    "tests/integration/state/test_hoststate_cache_pg.py",  # 40 tests x their own nova databases
    "tests/integration/chaos/test_chaos_three_schedulers.py",
    "tests/integration/state/test_fresh_services_pg.py",
    "tests/integration/placement/test_overcommit_real.py",
    "tests/integration/fuzz/test_fuzz_rpc.py",  # 300 examples of 8 messages through the daemon
    "tests/integration/rpc/test_rpc_oslo_wire.py",
    "tests/integration/chaos/test_chaos_broker_restart.py",
    "tests/integration/state/test_hoststate_image_props.py",
    "tests/integration/rpc/test_rpc_broker_restart.py",
    "tests/integration/placement/test_placement_keystone.py",
    "tests/integration/e2e/test_e2e_dropin.py",
)


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::", 1)[0]
    for i, prefix in enumerate(LONGEST_FIRST):
        if path.startswith(prefix):
            return i
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: a file's own tests, and the other files, keep their order


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Every test database handed to the background dropper is gone before the run ends."""
    from tests.support import pg_drop

    pg_drop.drain()
