"""The heap's keeper: what builds report made is frozen past KEEP_AT, only when enabled."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from asyncsched.common import heap
from asyncsched.common.heap import KEEP_AT, HeapKeeper


@pytest.fixture(autouse=True)
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()


def young(obj: object) -> bool:
    """``obj`` is in a generation the collector walks (not frozen)."""
    return any(o is obj for o in gc.get_objects())


def test_past_keep_at_the_young_heap_is_frozen() -> None:
    keeper = HeapKeeper()
    keeper.enabled = True
    built = [{"allocations": [1]} for _ in range(3)]
    keeper.made(KEEP_AT - 1)
    assert keeper.freezes == 0 and young(built)
    keeper.made(1)
    assert keeper.freezes == 1 and not young(built) and gc.get_freeze_count() > 0
    later: list[list[int]] = [[]]
    keeper.made(KEEP_AT - 1)  # counted afresh after a freeze
    assert keeper.freezes == 1 and young(later)


def test_a_keeper_not_enabled_only_counts() -> None:
    keeper = HeapKeeper()
    built: list[list[int]] = [[]]
    keeper.made(10 * KEEP_AT)
    assert keeper.freezes == 0 and young(built) and gc.get_freeze_count() == 0


def test_frozen_objects_are_still_freed_by_their_reference_counts() -> None:
    keeper = HeapKeeper()
    keeper.enabled = True
    built: list[list[int]] = [
        [] for _ in range(100)
    ]  # lists: always tracked (an empty dict is not)
    keeper.made(KEEP_AT)
    frozen = gc.get_freeze_count()
    del built
    assert gc.get_freeze_count() <= frozen - 101


def test_the_process_keeper_is_off_until_the_daemon_freezes_its_start_up_heap() -> None:
    assert heap.KEEPER.enabled is False  # tests and tools never freeze behind their back
