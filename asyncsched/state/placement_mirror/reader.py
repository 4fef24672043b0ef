"""Reading Placement's database: a full load, then refreshes costing what moved.

Placement bumps a provider's ``generation`` on every inventory, trait, aggregate and
allocation write, so the (id, generation, root, parent, name hash) of every provider, which
PostgreSQL sends as arrays in its binary form (one row, read whole by numpy), name the
providers whose rows, inventories, traits and aggregates must be read again.
``DELETE /allocations/{consumer}`` does not touch any generation, so allocations are followed
on their own: as the exact set of their ids (bitmaps, ``allocations.py``), whose difference
with the previous refresh names the rows gone (known here already) and the rows appeared
(read by id). Only the (provider, class) sums those rows touch move: the Python work of a
refresh is per row and provider changed, PostgreSQL's is one pass over the allocations'
ids with no sums and no sort of them (``sql.py`` has every statement). Every read of one
refresh runs in one read-only REPEATABLE READ transaction: one instant of Placement. On
MySQL/MariaDB the same statements' contracts hold (``sql_mysql.py``, ``connection.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from asyncsched.state.placement_mirror.allocations import (
    Bitmaps,
    KnownRows,
    Rows,
    bitmap_diff,
    sums,
)
from asyncsched.state.placement_mirror.binary import ArrayFormatError, Int64s, arrays, ascending
from asyncsched.state.placement_mirror.connection import MirrorConnection
from asyncsched.state.placement_mirror.model import (
    SHARING_TRAIT,
    Inventory,
    MirrorState,
    Provider,
)


@dataclass(frozen=True, slots=True)
class Names:
    """Placement's internal ids of resource classes and traits, by id."""

    classes: Mapping[int, str]
    traits: Mapping[int, str]


@dataclass(frozen=True, slots=True, eq=False)
class ProviderArrays:
    """Per provider, ascending id: id; generation << 32 | name hash; root << 32 | parent
    (0: none), as ``sql.PROVIDER_PRINTS`` packs them."""

    ids: Int64s
    generation_name: Int64s
    tree: Int64s

    @classmethod
    def decode(cls, *raw: bytes) -> ProviderArrays:
        return cls.checked(*arrays(tuple(raw), SIZES))

    @classmethod
    def checked(cls, *a: Int64s) -> ProviderArrays:
        """From the three arrays of one answer, whichever form it came in."""
        if len(a) != len(SIZES):
            raise ArrayFormatError(f"{len(a)} provider arrays, not {len(SIZES)}")
        if len({len(x) for x in a}) > 1:
            raise ArrayFormatError("arrays of different lengths")
        if not ascending(a[0]):
            raise ArrayFormatError("provider ids not ascending")
        return cls(*a)

    def columns(self) -> Int64s:
        """(providers, 2): the fields compared."""
        return np.stack([self.generation_name, self.tree], axis=1)

    def differ(self, other: ProviderArrays) -> npt.NDArray[np.bool_]:
        """Per provider, whether any field compared differs (the same ids in the same order:
        column by column, no (providers, 2) copies)."""
        out: npt.NDArray[np.bool_] = self.generation_name != other.generation_name
        out |= self.tree != other.tree
        return out


#: the byte sizes of ``PROVIDER_PRINTS``' arrays: int4 ids, two packed int8s
SIZES = (4, 8, 8)


#: the usage of each provider by class name; a dict is never changed once made (a refresh
#: makes a new one for a provider whose usage moved), so providers share them
Used = dict[int, dict[str, int]]


@dataclass(frozen=True, slots=True)
class Prints:
    """What the previous refresh saw, to compare the next one with."""

    providers: ProviderArrays
    bitmaps: Bitmaps
    rows: KnownRows
    used: Used


@dataclass(frozen=True, slots=True)
class RefreshResult:
    state: MirrorState
    names: Names
    changed: int  # providers (re)read in detail
    removed: int
    prints: Prints | None = None
    rows_moved: int = 0  # allocation rows gone or appeared


async def _names(conn: MirrorConnection) -> Names:
    classes = {r[0]: r[1] for r in await conn.fetch(conn.sql.class_names)}
    traits = {r[0]: r[1] for r in await conn.fetch(conn.sql.trait_names)}
    return Names(classes, traits)


async def _details(
    conn: MirrorConnection, names: Names, ids: list[int] | None
) -> tuple[dict[int, dict[str, Inventory]], dict[int, set[str]], dict[int, set[str]]]:
    """Inventories, traits and aggregates of ``ids`` (every provider when None)."""
    args: tuple[list[int], ...] = () if ids is None else (ids,)

    def q(query: str, where: str) -> str:
        return query if ids is None else query + where

    # Clouds are made of few host types: equal inventories share one value (memory at scale).
    seen: dict[tuple[Any, ...], Inventory] = {}
    inv: dict[int, dict[str, Inventory]] = {}
    stmt = conn.sql
    for r in await conn.fetch(q(stmt.inventories, stmt.inventories_where), *args):
        key = (r[2], r[3], r[4], r[5], r[6], float(r[7]))
        value = seen.get(key)
        if value is None:
            value = seen[key] = Inventory(*key)
        inv.setdefault(r[0], {})[names.classes[r[1]]] = value
    traits: dict[int, set[str]] = {}
    for r in await conn.fetch(q(stmt.traits, stmt.traits_where), *args):
        traits.setdefault(r[0], set()).add(names.traits[r[1]])
    aggs: dict[int, set[str]] = {}
    for r in await conn.fetch(q(stmt.aggregates, stmt.aggregates_where), *args):
        aggs.setdefault(r[0], set()).add(r[1])
    return inv, traits, aggs


def _interned(sets: dict[int, set[str]]) -> dict[int, frozenset[str]]:
    """One frozenset per distinct set of traits (or aggregates)."""
    pool: dict[frozenset[str], frozenset[str]] = {}
    out: dict[int, frozenset[str]] = {}
    for rp_id, names in sets.items():
        f = frozenset(names)
        out[rp_id] = pool.setdefault(f, f)
    return out


@dataclass(frozen=True, slots=True)
class _Usage:
    """The allocations part of one refresh: bitmaps, rows known, usage, what it touched."""

    bitmaps: Bitmaps
    rows: KnownRows
    delta: dict[tuple[int, int], int]  # (provider, class id) -> change of the sum
    moved: int
    full: Rows | None = None  # the first load's rows


async def _allocations(conn: MirrorConnection, prints: Prints | None) -> _Usage:
    """Every allocation row (no prints yet), or the rows gone and appeared since ``prints``."""
    stmt = conn.sql
    if prints is None:
        rows = Rows.checked(*await conn.arrays(stmt.allocations_all, (4, 4, 4, 4)))
        return _Usage(Bitmaps.of_ids(rows.ids), KnownRows.of(rows), {}, len(rows), rows)
    bitmaps = Bitmaps.checked(*await conn.arrays(stmt.allocation_bitmaps, (4, 8)))
    gone, came_ids = bitmap_diff(prints.bitmaps, bitmaps)
    if not len(gone) and not len(came_ids):
        return _Usage(bitmaps, prints.rows, {}, 0)
    came = Rows.empty()
    if len(came_ids):
        came = Rows.checked(
            *await conn.arrays(stmt.allocations_by_id, (4, 4, 4, 4), came_ids.tolist())
        )
        if not np.array_equal(came.ids, came_ids):
            raise ArrayFormatError("the allocations read are not those that appeared")
    known, left = prints.rows.moved(gone, came)
    delta = sums(came)
    for key, n in sums(left, -1).items():
        delta[key] = delta.get(key, 0) + n
    return _Usage(bitmaps, known, delta, len(gone) + len(came))


def _used_after(prints: Prints | None, usage: _Usage, names: Names) -> tuple[Used, set[int]]:
    """(usage per provider after this refresh, providers whose usage moved)."""
    classes = names.classes
    if usage.full is not None:
        used: Used = {}
        for (rp, rc), n in sums(usage.full).items():
            if n:
                used.setdefault(rp, {})[_class(classes, rc)] = n
        return used, set(used)
    assert prints is not None
    if not usage.delta:
        return prints.used, set()
    by_rp: dict[int, list[tuple[str, int]]] = {}
    for (rp, rc), n in usage.delta.items():
        if n:
            by_rp.setdefault(rp, []).append((_class(classes, rc), n))
    used = dict(prints.used)
    for rp, moves in by_rp.items():
        now = dict(used.get(rp, {}))
        for rc_name, n in moves:
            v = now.get(rc_name, 0) + n
            if v:
                now[rc_name] = v
            else:
                now.pop(rc_name, None)
        if now:
            used[rp] = now
        else:
            used.pop(rp, None)
    return used, set(by_rp)


def _class(classes: Mapping[int, str], rc: int) -> str:
    name = classes.get(rc)
    if name is None:
        raise ArrayFormatError(f"an allocation of resource class id {rc}, unknown")
    return name


def _new_classes(usage: _Usage, names: Names | None) -> bool:
    """Whether the rows read name a class id the names do not have."""
    if names is None:
        return True
    if usage.full is not None:
        return any(int(c) not in names.classes for c in np.unique(usage.full.rc).tolist())
    return any(rc not in names.classes for _, rc in usage.delta)


async def read(
    conn: MirrorConnection,
    old: MirrorState | None,
    names: Names | None,
    prints: Prints | None = None,
) -> RefreshResult:
    """One refresh inside the caller's transaction: full when ``old`` is None.

    Providers and allocation ids come first as arrays and are compared with the previous
    refresh's as whole arrays, so an unchanged cloud costs two rows; rows are read only for
    the providers and allocations that changed.
    """
    arrays_now = ProviderArrays.checked(*await conn.arrays(conn.sql.provider_prints, SIZES))
    if old is None or prints is None:
        prints = None
        changed: list[int] = arrays_now.ids.tolist()
        removed: list[int] = []
    else:
        changed, removed = _providers_moved(prints.providers, arrays_now)
    usage = await _allocations(conn, prints)
    if changed or _new_classes(usage, names):
        names = await _names(conn)
    assert names is not None
    used, touched = _used_after(prints, usage, names)
    new = Prints(arrays_now, usage.bitmaps, usage.rows, used)
    if old is not None and not changed and not removed and not touched:
        return RefreshResult(old, names, 0, 0, new, usage.moved)
    providers: dict[int, Provider] = {} if old is None else dict(old.providers)
    for i in removed:
        del providers[i]
    if changed:
        await _read_providers(conn, names, None if old is None else changed, providers, used)
    fresh = set(changed)
    empty: dict[str, int] = {}
    for rp_id in touched - fresh:
        prev = providers.get(rp_id)
        if prev is not None:
            providers[rp_id] = replace(prev, used=used.get(rp_id, empty))
    known_traits = frozenset(names.traits.values())
    known_classes = frozenset(names.classes.values())
    if (
        old is not None
        and not removed
        and len(providers) == len(old.providers)
        and old.known_traits == known_traits
        and old.known_classes == known_classes
        and all(_same_shape(old.providers.get(i), providers[i]) for i in changed)
    ):
        # same trees, uuids and sharing: no rebuild, and readers redo only what moved
        state = old.with_providers(providers, fresh | touched)
    else:
        state = MirrorState.build(providers, known_traits, known_classes)
    return RefreshResult(state, names, len(changed), len(removed), new, usage.moved)


async def _read_providers(
    conn: MirrorConnection,
    names: Names,
    ids: list[int] | None,
    providers: dict[int, Provider],
    used: Used,
) -> None:
    """(Re)read ``ids`` (every provider when None) into ``providers``."""
    rows = await conn.fetch(
        conn.sql.providers + ("" if ids is None else conn.sql.providers_where),
        *(() if ids is None else (ids,)),
    )
    inv, traits, aggs = await _details(conn, names, ids)
    trait_sets, agg_sets = _interned(traits), _interned(aggs)
    empty: dict[str, int] = {}
    for r in rows:
        rp_id = r[0]
        providers[rp_id] = Provider(
            id=rp_id,
            uuid=r[1],
            name=r[2],
            generation=r[3],
            root_id=r[4] if r[4] is not None else rp_id,
            parent_id=r[5],
            inventories=inv.get(rp_id, {}),
            traits=trait_sets.get(rp_id, frozenset()),
            aggregates=agg_sets.get(rp_id, frozenset()),
            used=used.get(rp_id, empty),
        )


def _providers_moved(old: ProviderArrays, new: ProviderArrays) -> tuple[list[int], list[int]]:
    """(changed, removed) provider ids, ascending; numpy, no Python step per provider."""
    if np.array_equal(old.ids, new.ids):
        moved = old.differ(new)
        return new.ids[moved].tolist(), []
    _, io, inew = np.intersect1d(old.ids, new.ids, assume_unique=True, return_indices=True)
    differ = np.any(old.columns()[io] != new.columns()[inew], axis=1)
    fresh = np.ones(len(new.ids), dtype=bool)
    fresh[inew] = differ
    kept = np.zeros(len(old.ids), dtype=bool)
    kept[io] = True
    return new.ids[fresh].tolist(), old.ids[~kept].tolist()


def _same_shape(old: Provider | None, new: Provider) -> bool:
    """Whether ``new`` leaves the state's trees, uuids and nested/sharing classes as they were."""
    if old is None or old.parent_id != new.parent_id or old.root_id != new.root_id:
        return False
    sharing = SHARING_TRAIT in new.traits
    if sharing != (SHARING_TRAIT in old.traits):
        return False
    return (new.is_root and not sharing) or old.inventories.keys() == new.inventories.keys()
