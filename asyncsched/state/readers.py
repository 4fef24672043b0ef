"""Keyset readers of a cell database: services, compute nodes and instances as values.

Readers turn rows into values page by page, reusing the objects already held for rows that
did not change: a full resync then leaves almost nothing new for the cyclic GC, and
unchanged rows compare by identity in the diff (``index``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asyncsched.state.beats import with_beat
from asyncsched.state.db import NovaDatabase
from asyncsched.state.index import CellIndex, NodeRead, ServiceRow
from asyncsched.state.rows import aware, node_snapshot
from asyncsched.state.sql import CHUNK, INSTANCE_PAGE, NODE_PAGE, WATERMARK_OVERLAP

# beat rows turned into values between two turns given to the event loop: a sweep reads a
# cell's every beat (10,000 rows), 0.3 s in one piece on a loaded 2-core machine
BEAT_CHUNK = 2 * CHUNK

# updated_at, created_at, deleted_at of a services row as one text, written by the database
# (``sql._stamp``): compared, never parsed
Stamp = str


@dataclass(slots=True)
class ServicesRead:
    """The services rows read (deleted first) and the stamp of every row seen, by id."""

    rows: list[ServiceRow]
    stamps: dict[int, Stamp]


@dataclass(frozen=True, slots=True)
class Held:
    """The services ids the cache holds disabled, forced down and silent (``fresh``): a pass
    given them reads only the changed rows that can change a verdict
    (``sql.service_stamps_verdict``), no beat of a host held up."""

    disabled: list[int]
    forced: list[int]
    silent: list[int]


async def read_services(
    db: NovaDatabase,
    index: CellIndex,
    since: datetime | None,
    seen: datetime | None = None,
    held: Held | None = None,
) -> ServicesRead:
    """Every nova-compute service (``since`` None), else those changed since (of them, only
    those that can change a verdict given ``held``; None: every beat too, a sweep): their
    stamps first, then rows only for the stamps not already applied
    (``index.service_stamps``) or not older than ``seen`` (see ``read_stamped``; None: every
    changed row is read)."""
    if since is None:
        read = await services_read(index, await db.fetch(db.sql.services_all))
        index.service_sigs = {
            i: index.service_sigs[i] for i in read.stamps if i in index.service_sigs
        }
        return read
    # whole seconds: a stamp written in the same second as ``seen`` (truncated by MySQL, or
    # by a writer whose clock says so) may follow the read it was applied by
    recent = since if seen is None else seen.replace(microsecond=0)
    if held is None:
        changed = await db.fetch(db.sql.service_stamps_changed, since, recent)
    else:
        args = (held.disabled, held.forced, held.silent)
        changed = await db.fetch(db.sql.service_stamps_verdict, since, recent, *args)
    return await read_stamped(db, index, changed)


def moved_ids(known: dict[int, Stamp], changed: Sequence[Any]) -> list[int]:
    """The ids of ``changed`` (id, stamp, recent) whose stamp is not the one applied
    (``known``) or is recent. The watermark overlap gives every row of a cell's 10,000
    that beat in the last 15 s: one plain loop over one text a row."""
    return [sid for sid, stamp, recent in changed if recent or known.get(sid) != stamp]


async def read_stamped(db: NovaDatabase, index: CellIndex, changed: Sequence[Any]) -> ServicesRead:
    """The rows of ``changed`` (id, stamp, recent) whose stamp is not the one already
    applied, or is recent: not older than the DB instant of the read that applied it, in
    whole seconds (on MySQL stamps are whole seconds, so a row changed again within the
    second that read saw keeps its stamp). Heartbeats read narrow, the others whole. No
    query when there is none."""
    want = moved_ids(index.service_stamps, changed)
    if not want:
        return ServicesRead([], {})
    fetched = await db.fetch(db.sql.services_beats, want)
    beats = BeatRows([], {}, [])
    for start in range(0, len(fetched), BEAT_CHUNK):  # a sweep: a cell's 10,000 beats
        if start:
            await asyncio.sleep(0)
        beat_rows(index, fetched[start : start + BEAT_CHUNK], beats)
    rows = await db.fetch(db.sql.services_by_id, beats.whole) if beats.whole else []
    read = await services_read(index, rows)
    read.rows.extend(beats.rows)  # live rows: the deleted ones stay first
    read.stamps.update(beats.stamps)
    return read


@dataclass(slots=True)
class BeatRows:
    """What the narrow read of changed services rows found: heartbeats as values, and the
    ids whose row changed otherwise (or is not known), to be read whole."""

    rows: list[ServiceRow]
    stamps: dict[int, Stamp]
    whole: list[int]


def beat_rows(index: CellIndex, rows: Sequence[Any], into: BeatRows | None = None) -> BeatRows:
    """Rows (id, last_seen_up, updated_at: the beat, aware on PostgreSQL; stamp; sig)
    whose signature is the one applied are
    heartbeats: the applied ServiceInfo with its new beat, or that ServiceInfo itself when
    the beat is the one it holds (a row read again in the watermark's overlap: nothing to
    swap, no new object). Added to ``into`` when given (a read taken in pieces)."""
    out = BeatRows([], {}, []) if into is None else into
    sigs = index.service_sigs
    stamps = out.stamps
    for sid, beat, beat_at, stamp, sig in rows:
        seen = sigs.get(sid)
        if seen is None or seen[0] != sig:
            out.whole.append(sid)
            continue
        held = seen[1]
        beat, beat_at = aware(beat), aware(beat_at)
        if beat != held.last_seen_up or beat_at != held.updated_at:
            held = with_beat(held, beat, beat_at)
            sigs[sid] = (sig, held)
        out.rows.append((sid, held.host, held))
        stamps[sid] = stamp
    return out


async def services_read(index: CellIndex, rows: Sequence[Any]) -> ServicesRead:
    """Services rows as values (deleted first), reusing the ServiceInfo of unchanged rows."""
    out: list[ServiceRow] = []
    stamps: dict[int, Stamp] = {}
    for i, r in enumerate(rows):
        stamps[r["id"]] = r["stamp"]
        host = r["host"]
        if not host:
            continue
        if r["deleted"]:
            index.service_sigs.pop(r["id"], None)
            out.append((r["id"], host, None))
            continue
        svc = index.service_of(r)
        sig = r.get("sig")
        if sig is not None:
            index.service_sigs[r["id"]] = (sig, svc)
        cur = index.services.get(host)
        out.append((r["id"], host, cur if cur is svc or cur == svc else svc))
        if i % (4 * CHUNK) == 4 * CHUNK - 1:
            await asyncio.sleep(0)
    out.sort(key=lambda t: t[2] is not None)
    return ServicesRead(out, stamps)


async def read_nodes(
    db: NovaDatabase, index: CellIndex, cell_uuid: str, sql: str, *args: Any
) -> NodeRead:
    """Snapshots of the live rows (unchanged rows keep theirs: no JSON parsed) and the
    uuids of soft-deleted rows."""
    read = NodeRead()
    last = -1
    parsed = 0
    while True:
        rows = await db.fetch(sql, last, NODE_PAGE, *args)
        for r in rows:
            u = r["uuid"]
            if not u:
                continue
            if r["deleted"]:
                read.deleted.add(u)
                continue
            read.live.add(u)
            try:
                sig: int | None = hash(tuple(r))
            except TypeError:
                sig = None
            prev = index.snaps.get(u)
            if prev is not None and sig is not None and index.sigs.get(u) == sig:
                read.snaps[u] = prev
                continue
            snap = node_snapshot(r, cell_uuid)
            if snap is not None:
                read.snaps[u] = snap
                if sig is not None:
                    read.sigs[u] = sig
            parsed += 1
            if parsed % CHUNK == 0:
                await asyncio.sleep(0)  # parsing 10k JSON rows must not stall requests
        await asyncio.sleep(0)
        if len(rows) < NODE_PAGE:
            return read
        last = rows[-1]["id"]


async def read_instances(db: NovaDatabase, sql: str, *args: Any) -> dict[str, str | None]:
    """instance uuid -> host (None: deleted or no host)."""
    out: dict[str, str | None] = {}
    last = -1
    while True:
        rows = await db.fetch(sql, last, INSTANCE_PAGE, *args)
        for r in rows:
            deleted = r.get("deleted", 0)
            out[r["uuid"]] = None if deleted else r["host"]
        await asyncio.sleep(0)
        if len(rows) < INSTANCE_PAGE:
            return out
        last = rows[-1]["id"]


@dataclass(frozen=True, slots=True)
class CellRead:
    """One pass over a cell database: everything (``since`` None) or the rows changed since."""

    db_now: datetime  # naive UTC, the next watermark
    services: list[ServiceRow]
    service_stamps: dict[int, Stamp]  # applied with the read (full: the whole set)
    nodes: NodeRead
    insts: dict[str, str | None]


@dataclass(frozen=True, slots=True)
class ServicesPlan:
    """How an incremental pass reads services: every beat changed since ``since`` (a sweep:
    ``held`` None; ``since`` is the previous sweep's watermark), else only the rows that can
    change a verdict given ``held``, since the pass's own watermark."""

    since: datetime | None = None
    held: Held | None = None


async def read_cell(
    db: NovaDatabase,
    index: CellIndex,
    cell_uuid: str,
    since: datetime | None,
    plan: ServicesPlan = ServicesPlan(),
) -> CellRead:
    """Services, nodes and instances read in parallel. Raises ``DatabaseUnavailable``."""
    q = db.sql
    now_rows = await db.fetch(q.now)
    db_now: datetime = now_rows[0]["now"]
    if since is None:
        services, nodes, insts = await asyncio.gather(
            read_services(db, index, None),
            read_nodes(db, index, cell_uuid, q.nodes_all),
            read_instances(db, q.instances_all),
        )
    else:
        svc_since = since if plan.since is None else plan.since
        seen = svc_since + WATERMARK_OVERLAP  # the previous read's instant (cache.py)
        services, nodes, insts = await asyncio.gather(
            read_services(db, index, svc_since, seen, plan.held),
            read_nodes(db, index, cell_uuid, q.nodes_changed, since),
            read_instances(db, q.instances_changed, since),
        )
    return CellRead(db_now, services.rows, services.stamps, nodes, insts)
