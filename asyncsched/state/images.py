"""Instances' image properties (ImagePropertiesWeigher), read from a cell's
``instance_system_metadata`` only while the weigher can matter (``rows.image_props_wanted``).

Why a pool: thousands of instances use a handful of images, so each distinct set of rows is
parsed and stored once and instances share the parsed mapping (identity tells "unchanged").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from asyncsched.exceptions import DatabaseUnavailable
from asyncsched.state.db import NovaDatabase
from asyncsched.state.rows import image_props_from_system_metadata
from asyncsched.state.sql import CHUNK, SYSMETA_BATCH, SYSMETA_PAGE

LOG = logging.getLogger(__name__)

ImageProps = Mapping[str, str]


def split_kv(kv: str) -> list[tuple[str, str | None]]:
    """The folded ``key US value RS ...`` string of the sysmeta_* queries back into rows."""
    out: list[tuple[str, str | None]] = []
    for item in kv.split("\x1e"):
        key, _, value = item.partition("\x1f")
        out.append((key, value))
    return out


@dataclass(eq=False)
class PropsRead:
    """What one read of instance_system_metadata found: parsed (shared) image properties by
    instance; ``uuids`` the instances re-read (None: everything, a full read)."""

    props: dict[str, ImageProps]
    uuids: set[str] | None


@dataclass(eq=False)
class PropsPool:
    """Parsed image properties shared between instances."""

    by_raw: dict[str, ImageProps] = field(default_factory=dict)
    by_value: dict[frozenset[tuple[str, str]], ImageProps] = field(default_factory=dict)

    def parse(self, raw: str, reuse: PropsPool | None = None) -> ImageProps:
        """One instance's folded rows -> its shared parsed properties."""
        got = self.by_raw.get(raw)
        if got is None and reuse is not None:
            got = reuse.by_raw.get(raw)
        if got is None:
            parsed = image_props_from_system_metadata(split_kv(raw))
            key = frozenset(parsed.items())
            got = self.by_value.get(key)
            if got is None and reuse is not None:
                got = reuse.by_value.get(key)
            if got is None:
                got = MappingProxyType(parsed)
            self.by_value[key] = got
        self.by_raw[raw] = got
        return got


@dataclass(eq=False)
class CellImages:
    """One cell's image-properties reading state (the values live in its ``CellIndex``)."""

    pool: PropsPool = field(default_factory=PropsPool)
    full_needed: bool = True  # next pass reads them all (first, after an error)
    error: str | None = None


async def fetch_image_rows(db: NovaDatabase, uuids: Iterable[str]) -> dict[str, str]:
    """Folded image_* system-metadata rows of these instances (batched ANY, indexed)."""
    raw: dict[str, str] = {}
    todo = sorted(uuids)
    for i in range(0, len(todo), SYSMETA_BATCH):
        rows = await db.fetch(db.sql.sysmeta_of, todo[i : i + SYSMETA_BATCH])
        raw.update((r[0], r[1]) for r in rows)
    return raw


async def parse_image_rows(
    images: CellImages, raw: Mapping[str, str], *, full: bool
) -> dict[str, ImageProps]:
    """Rows -> shared parsed properties; instances without image properties are left
    out. A full read starts a fresh pool (reusing the old objects) so it never grows."""
    pool = PropsPool() if full else images.pool
    reuse = images.pool if full else None
    out: dict[str, ImageProps] = {}
    for i, (uuid, kv) in enumerate(raw.items()):
        props = pool.parse(kv, reuse)
        if props:
            out[uuid] = props
        if i % (16 * CHUNK) == 16 * CHUNK - 1:
            await asyncio.sleep(0)
    if full:
        images.pool = pool
    return out


async def read_image_props(
    db: NovaDatabase,
    images: CellImages,
    label: str,
    insts: Mapping[str, str | None],
    *,
    full: bool,
    since: datetime | None,
    metrics: dict[str, int],
) -> PropsRead | None:
    """The image properties of every instance (full), or of the instances whose row or
    image metadata changed since ``since``; None when the read failed (logged, counted,
    and the next pass reads everything again)."""
    try:
        if full or since is None:
            raw: dict[str, str] = {}
            last = ""
            while True:
                rows = await db.fetch(db.sql.sysmeta_all, last, SYSMETA_PAGE)
                for r in rows:
                    raw[r[0]] = r[1]
                await asyncio.sleep(0)
                if len(rows) < SYSMETA_PAGE:
                    break
                last = rows[-1][0]
            uuids: set[str] | None = None
        else:
            uuids = {u for u, host in insts.items() if host is not None}
            rows = await db.fetch(db.sql.sysmeta_changed, since)
            uuids.update(r["instance_uuid"] for r in rows)
            raw = await fetch_image_rows(db, uuids)
    except DatabaseUnavailable as exc:
        metrics["image_props_failures"] += 1
        images.full_needed = True
        if images.error is None:
            LOG.warning(
                "cell %s: could not read the instances' image properties (kept as they"
                " were; ImagePropertiesWeigher scores from them): %s",
                label,
                exc,
            )
        images.error = str(exc)
        return None
    if images.error is not None:
        LOG.warning("cell %s: instances' image properties readable again", label)
        images.error = None
    metrics["image_props_reads"] += 1
    return PropsRead(props=await parse_image_rows(images, raw, full=uuids is None), uuids=uuids)


async def read_props_of(
    db: NovaDatabase,
    images: CellImages,
    uuids: Iterable[str],
    host: str,
    metrics: dict[str, int],
) -> dict[str, ImageProps]:
    """The image properties of these instances of ``host``; {} when the read failed
    (logged and counted)."""
    try:
        raw = await fetch_image_rows(db, uuids)
    except DatabaseUnavailable as exc:
        metrics["image_props_failures"] += 1
        LOG.warning("could not read image properties of host %s: %s", host, exc)
        return {}
    return await parse_image_rows(images, raw, full=False)
