"""Rollbacks Placement could not take yet: kept, journaled, retried until it answers.

A claim rolled back while Placement is down (or a claim that timed out and may have been
applied) would otherwise stay allocated for ever: nothing else in nova removes it. The
Placement client hands such a consumer here; the rollback is then a promise kept by a
background task that retries with backoff until Placement answers. The promise survives a
restart of the daemon through a small JSON journal written atomically under
``[asyncsched] state_dir`` and replayed at start.

A retry undoes only what we wrote: on the consumer generation our write left (fencing), or,
when that is not known, only while the consumer holds exactly what we wrote. When the consumer
changed since (another process took the claim over, a later move, a new claim of the same
instance), it is left alone and the entry dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from asyncsched.common.tasks import cancel_and_wait
from asyncsched.exceptions import PlacementError
from asyncsched.placement.health import PendingHealth

LOG = logging.getLogger(__name__)

JOURNAL_NAME = "placement-rollbacks.json"
JOURNAL_VERSION = 1
RETRY_MIN = 1.0
RETRY_MAX = 30.0
RETRY_CONCURRENCY = 16  # rollbacks retried at once when Placement is back

#: provider uuid -> resource class -> amount
Allocations = Mapping[str, Mapping[str, int]]


def _ints(allocs: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    return {rp: {rc: int(n) for rc, n in r.items()} for rp, r in dict(allocs).items()}


@dataclass(frozen=True, slots=True)
class Claimed:
    """What this process wrote for one consumer: enough to undo exactly that write.

    Undoing puts ``before`` back (nothing for a new consumer, the source allocation for a
    move) on condition that the consumer is still at ``generation``: a process that lost the
    consumer to another (a redelivery adopted and took over its claim) is refused (409)."""

    allocations: Allocations  # the allocation we asked for
    generation: int | None = None  # the consumer generation our write left; None: not known
    before: Allocations = field(default_factory=dict)  # what the consumer held before it
    project_id: str | None = None
    user_id: str | None = None

    def holds(self) -> dict[str, dict[str, int]]:
        """What the consumer holds right after our write (nova's doubled-up move claim)."""
        out = _ints(self.before)
        for rp, r in _ints(self.allocations).items():
            out.setdefault(rp, r)
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "allocations": _ints(self.allocations),
            "generation": self.generation,
            "before": _ints(self.before),
            "project_id": self.project_id,
            "user_id": self.user_id,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Claimed | None:
        allocs = raw.get("allocations")
        if allocs is None:
            return None
        gen = raw.get("generation")
        return cls(
            allocations=_ints(allocs),
            generation=None if gen is None else int(gen),
            before=_ints(raw.get("before") or {}),
            project_id=raw.get("project_id"),
            user_id=raw.get("user_id"),
        )


@dataclass(frozen=True, slots=True)
class PendingRollback:
    consumer_uuid: str
    claimed: Claimed | None  # what we wrote; None: not known, remove whatever is held
    since: float  # wall clock of the first failure

    def as_json(self) -> dict[str, Any]:
        claimed = {} if self.claimed is None else self.claimed.as_json()
        return {
            "consumer_uuid": self.consumer_uuid,
            "allocations": None,
            **claimed,
            "since": self.since,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> PendingRollback:
        return cls(
            consumer_uuid=str(raw["consumer_uuid"]),
            claimed=Claimed.from_json(raw),
            since=float(raw.get("since", 0.0)),
        )


class Journal:
    """The pending rollbacks on disk: one small JSON file, replaced atomically."""

    def __init__(self, path: Path | None) -> None:
        self.path = path  # None: memory only

    @classmethod
    def in_dir(cls, state_dir: str | None) -> Journal:
        """``state_dir``, else systemd's ``$STATE_DIRECTORY``, else memory only."""
        where = state_dir or os.environ.get("STATE_DIRECTORY", "").split(":")[0]
        return cls(Path(where) / JOURNAL_NAME if where else None)

    def load(self) -> list[PendingRollback]:
        if self.path is None or not self.path.exists():
            return []
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return [PendingRollback.from_json(e) for e in data["pending"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            aside = self.path.with_suffix(f".corrupt-{int(time.time())}")
            with contextlib.suppress(OSError):
                self.path.rename(aside)
            LOG.error(
                "placement: rollback journal %s unreadable (%s); moved aside to %s: the "
                "allocations it listed may be left in Placement",
                self.path,
                exc,
                aside,
            )
            return []

    def save(self, entries: list[PendingRollback]) -> None:
        """Write to a temporary file, fsync, rename over the journal, fsync the directory."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(
            {"version": JOURNAL_VERSION, "pending": [e.as_json() for e in entries]},
            separators=(",", ":"),
        ).encode()
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, body)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dfd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class Remover(Protocol):
    """What a retry needs from the Placement client: one attempt (PlacementClient.undo_once)."""

    async def undo_once(self, consumer_uuid: str, claimed: Claimed | None) -> bool: ...


class PendingRollbacks:
    """The consumers still to roll back, their journal and the task retrying them."""

    def __init__(
        self,
        remover: Remover,
        journal: Journal,
        *,
        retry_min: float = RETRY_MIN,
        retry_max: float = RETRY_MAX,
        rng: random.Random | None = None,
    ) -> None:
        self._remover = remover
        self.journal = journal
        self.retry_min = retry_min
        self.retry_max = retry_max
        self._rng = rng or random.Random()
        self._pending: dict[str, PendingRollback] = {}
        self._wake = asyncio.Event()
        self._save_lock = asyncio.Lock()
        self._changes = 0  # changes made to _pending so far
        self._saved = 0  # changes the journal on disk includes
        self.writes = 0
        self._task: asyncio.Task[None] | None = None
        self.done = 0
        self.dropped = 0
        self.last_error: str | None = None

    def __contains__(self, consumer_uuid: str) -> bool:
        return consumer_uuid in self._pending

    def __len__(self) -> int:
        return len(self._pending)

    async def start(self) -> None:
        """Replay the journal and start retrying (the Placement component's start)."""
        for entry in await asyncio.to_thread(self.journal.load):
            self._pending.setdefault(entry.consumer_uuid, entry)
        if self._pending:
            LOG.warning(
                "placement: %d rollbacks from before the restart still to do: %s",
                len(self._pending),
                ", ".join(sorted(self._pending)[:10]),
            )
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="placement-rollback-retry")
        self._wake.set()

    async def close(self) -> None:
        """Stop retrying; what is left stays in the journal for the next start."""
        task, self._task = self._task, None
        await cancel_and_wait(task)

    async def add(self, consumer_uuid: str, claimed: Claimed | None) -> None:
        """Promise the rollback: returns once it is journaled (or, without a journal, kept)."""
        if consumer_uuid not in self._pending:
            first = not self._pending
            self._pending[consumer_uuid] = PendingRollback(consumer_uuid, claimed, time.time())
            await self._save()
            LOG.log(
                logging.WARNING if first else logging.INFO,
                "placement: rollback of %s kept; retried until Placement answers (%d pending)",
                consumer_uuid,
                len(self._pending),
            )
        self._wake.set()

    async def discard(self, consumer_uuid: str) -> None:
        """A new claim of this consumer succeeded: its allocation is wanted now."""
        if self._pending.pop(consumer_uuid, None) is not None:
            await self._save()

    async def _save(self) -> None:
        """Group commit: a change waits for one write that includes it, so a rollback of
        thousands of claims during an outage writes the journal a few times, not thousands."""
        self._changes += 1
        mine = self._changes
        async with self._save_lock:
            if self._saved >= mine:
                return  # a write that started after this change already covered it
            upto = self._changes
            entries = list(self._pending.values())
            try:
                await asyncio.to_thread(self.journal.save, entries)
                self._saved = upto
                self.writes += 1
            except OSError as exc:
                LOG.error(
                    "placement: rollback journal %s not written (%s): %d pending rollbacks "
                    "would be lost on a restart",
                    self.journal.path,
                    exc,
                    len(entries),
                )

    async def _run(self) -> None:
        delay = self.retry_min
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._pending:
                delay = self.retry_min
                continue
            try:
                empty = await self.retry_once()
            except Exception:  # never let the retry task die: the promise would be lost
                LOG.exception("placement: rollback retry failed unexpectedly")
                empty = False
            if empty:
                delay = self.retry_min
                continue
            await asyncio.sleep(self._rng.uniform(delay / 2, delay))
            delay = min(delay * 2, self.retry_max)
            self._wake.set()

    async def retry_once(self) -> bool:
        """One pass over the pending rollbacks, RETRY_CONCURRENCY at a time; stops at the
        first chunk Placement fails. True when none is left."""
        entries = list(self._pending.values())
        changed = False
        for i in range(0, len(entries), RETRY_CONCURRENCY):
            chunk = entries[i : i + RETRY_CONCURRENCY]
            got = await asyncio.gather(*(self._remove(e) for e in chunk), return_exceptions=True)
            failed: BaseException | None = None
            for entry, result in zip(chunk, got, strict=True):
                if result is None:
                    self._pending.pop(entry.consumer_uuid, None)
                    changed = True
                elif not isinstance(result, PlacementError):
                    raise result  # a bug: _run logs it and keeps the entries
                else:
                    failed = result
            if failed is not None:
                self.last_error = str(failed)
                LOG.info(
                    "placement: %d rollbacks wait for Placement: %s", len(self._pending), failed
                )
                break
        if changed:
            await self._save()
        return not self._pending

    async def _remove(self, entry: PendingRollback) -> None:
        if not await self._remover.undo_once(entry.consumer_uuid, entry.claimed):
            self.dropped += 1  # the consumer changed since our write: not ours to undo
            return
        self.done += 1
        LOG.info(
            "placement: delayed rollback of %s done after %.0f s",
            entry.consumer_uuid,
            time.time() - entry.since,
        )

    def health(self) -> PendingHealth:
        oldest = min((e.since for e in self._pending.values()), default=None)
        return PendingHealth(
            pending=len(self._pending),
            oldest_age_s=None if oldest is None else round(time.time() - oldest, 1),
            done=self.done,
            dropped=self.dropped,
            journal=None if self.journal.path is None else str(self.journal.path),
            last_error=self.last_error,
        )
