"""Rollbacks Placement could not take: journaled atomically, retried until done, replayed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from asyncsched.placement.errors import PlacementConnectionError
from asyncsched.placement.pending import Claimed, Journal, PendingRollback, PendingRollbacks

CLAIMED = {"rp1": {"VCPU": 1, "MEMORY_MB": 512}}
MINE = Claimed(CLAIMED)  # generation not known: undone only while exactly this is held


class FlakyPlacement:
    """Allocations by consumer; ``down`` makes every call fail as an unreachable Placement."""

    def __init__(self) -> None:
        self.allocs: dict[str, dict[str, dict[str, int]]] = {}
        self.down = False
        self.calls = 0

    def _check(self) -> None:
        self.calls += 1
        if self.down:
            raise PlacementConnectionError("Placement unreachable")

    async def undo_once(self, consumer_uuid: str, claimed: Claimed | None) -> bool:
        """PlacementClient.undo_once's answer when the generation is not known."""
        self._check()
        held = self.allocs.get(consumer_uuid, {})
        if held and claimed is not None and held != claimed.holds():
            return False
        self.allocs.pop(consumer_uuid, None)
        return True


def pending(p: FlakyPlacement, path: Path | None) -> PendingRollbacks:
    return PendingRollbacks(p, Journal(path), retry_min=0.01, retry_max=0.05)


async def wait_for(cond: Any) -> None:
    async with asyncio.timeout(5):
        while not cond():  # noqa: ASYNC110 (polling a fake, no event to wait on)
            await asyncio.sleep(0.01)


def test_journal_round_trip_is_atomic(tmp_path: Path) -> None:
    j = Journal(tmp_path / "state" / "rollbacks.json")
    fenced = Claimed(CLAIMED, 3, {"src": {"VCPU": 1}}, "p", "u")
    entries = [
        PendingRollback("c1", MINE, 1.5),
        PendingRollback("c2", None, 2.0),
        PendingRollback("c3", fenced, 2.5),
    ]
    j.save(entries)
    assert j.load() == entries
    assert j.path is not None
    assert [p.name for p in j.path.parent.iterdir()] == ["rollbacks.json"]  # no temp left
    assert json.loads(j.path.read_text())["version"] == 1


def test_a_journal_written_before_fencing_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "rollbacks.json"
    old = {"consumer_uuid": "c1", "allocations": CLAIMED, "since": 1.5}
    path.write_text(json.dumps({"version": 1, "pending": [old, {**old, "allocations": None}]}))
    assert Journal(path).load() == [
        PendingRollback("c1", MINE, 1.5),
        PendingRollback("c1", None, 1.5),
    ]


def test_unreadable_journal_is_moved_aside_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "rollbacks.json"
    path.write_text('{"pending": [{"consumer')
    assert Journal(path).load() == []
    assert not path.exists() and len(list(tmp_path.glob("rollbacks.corrupt-*"))) == 1


def test_journal_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STATE_DIRECTORY", raising=False)
    assert Journal.in_dir(None).path is None
    assert Journal.in_dir(str(tmp_path)).path == tmp_path / "placement-rollbacks.json"
    monkeypatch.setenv("STATE_DIRECTORY", f"{tmp_path}/sd:/other")  # systemd's StateDirectory=
    assert Journal.in_dir(None).path == tmp_path / "sd" / "placement-rollbacks.json"


async def down_with_c1_kept(journal: Path) -> tuple[FlakyPlacement, PendingRollbacks]:
    """c1 holds what we claimed, Placement goes down, the rollback of c1 is kept."""
    p = FlakyPlacement()
    p.allocs["c1"] = {rp: dict(r) for rp, r in CLAIMED.items()}
    p.down = True
    rb = pending(p, journal)
    await rb.start()
    await rb.add("c1", MINE)
    return p, rb


async def test_kept_while_placement_is_down_then_done(tmp_path: Path) -> None:
    p, rb = await down_with_c1_kept(tmp_path / "j.json")
    assert [e.consumer_uuid for e in Journal(tmp_path / "j.json").load()] == ["c1"]
    await wait_for(lambda: p.calls >= 3)  # retried with backoff while down
    assert "c1" in rb and rb.health()["last_error"]
    p.down = False
    await wait_for(lambda: "c1" not in rb)
    await wait_for(lambda: Journal(tmp_path / "j.json").load() == [])
    assert p.allocs == {} and rb.health()["pending"] == 0 and rb.done == 1
    await rb.close()


async def test_replayed_after_a_restart(tmp_path: Path) -> None:
    p, first = await down_with_c1_kept(tmp_path / "j.json")
    await first.close()  # the daemon stops with the rollback not done
    assert p.allocs
    p.down = False
    second = pending(p, tmp_path / "j.json")
    await second.start()
    await wait_for(lambda: not p.allocs)
    await wait_for(lambda: Journal(tmp_path / "j.json").load() == [])
    await second.close()


async def test_a_consumer_holding_other_allocations_is_left_alone(tmp_path: Path) -> None:
    p = FlakyPlacement()
    p.allocs["c1"] = {"rp2": {"VCPU": 1, "MEMORY_MB": 512}}  # e.g. claimed again elsewhere
    rb = pending(p, tmp_path / "j.json")
    await rb.start()
    await rb.add("c1", MINE)
    await wait_for(lambda: "c1" not in rb)
    assert p.allocs["c1"] and rb.dropped == 1
    await rb.close()


async def test_unknown_allocations_are_deleted_whatever_is_held() -> None:
    p = FlakyPlacement()
    p.allocs["c1"] = {"rp9": {"VCPU": 2}}
    rb = pending(p, None)  # no journal: memory only
    await rb.start()
    await rb.add("c1", None)
    await wait_for(lambda: "c1" not in rb)
    assert p.allocs == {}
    await rb.close()


async def test_discard_takes_it_out_of_the_journal(tmp_path: Path) -> None:
    p = FlakyPlacement()
    p.down = True
    rb = pending(p, tmp_path / "j.json")
    await rb.add("c1", MINE)
    await rb.discard("c1")
    assert "c1" not in rb and Journal(tmp_path / "j.json").load() == []


async def test_many_rollbacks_at_once_write_the_journal_a_few_times(tmp_path: Path) -> None:
    """A 2,000-instance request rolled back during an outage: every rollback is journaled
    before add() returns, in a handful of writes (group commit), not one write each."""
    p = FlakyPlacement()
    p.down = True
    rb = pending(p, tmp_path / "j.json")
    uuids = [f"c{i}" for i in range(2000)]
    await asyncio.gather(*(rb.add(u, MINE) for u in uuids))
    assert sorted(e.consumer_uuid for e in Journal(tmp_path / "j.json").load()) == sorted(uuids)
    assert rb.writes <= 5, rb.writes


async def test_when_placement_is_back_they_are_retried_several_at_once(tmp_path: Path) -> None:
    p = FlakyPlacement()
    inflight = peak = 0
    real_undo = p.undo_once

    async def slow_undo(consumer_uuid: str, claimed: Claimed | None) -> bool:
        nonlocal inflight, peak
        inflight += 1
        peak = max(peak, inflight)
        await asyncio.sleep(0.005)
        inflight -= 1
        return await real_undo(consumer_uuid, claimed)

    p.undo_once = slow_undo  # type: ignore[method-assign]
    uuids = [f"c{i}" for i in range(100)]
    for u in uuids:
        p.allocs[u] = {rp: dict(r) for rp, r in CLAIMED.items()}
    rb = pending(p, tmp_path / "j.json")
    await asyncio.gather(*(rb.add(u, MINE) for u in uuids))
    await rb.start()
    await wait_for(lambda: len(rb) == 0)
    assert p.allocs == {} and rb.done == 100
    assert 1 < peak <= 16
    await rb.close()
