"""Reading Placement's database: a full load, then cheap refreshes of what moved.

Placement bumps a provider's ``generation`` on every inventory, trait, aggregate and
allocation write, so the (id, generation, root, parent, name hash) of every provider, which
PostgreSQL aggregates into arrays (one row), name the providers whose rows, inventories,
traits and aggregates must be read again. ``DELETE /allocations/{consumer}`` does not touch
any generation, so usage is read on its own, summed per provider and class over the index
Placement keeps for that (``allocations_resource_provider_class_used_idx``), as three arrays
in PostgreSQL's binary form that numpy reads whole (no Python int per sum: 285,050 sums at
100,000 providers). Comparing with the previous refresh is a byte comparison when nothing
moved and a numpy diff otherwise, so the Python work of a refresh is per provider touched,
and an idle 10,000-provider cloud costs two rows and almost no CPU here. Every read of
one refresh runs in one read-only REPEATABLE READ transaction: one instant of Placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import asyncpg
import numpy as np
import numpy.typing as npt

from asyncsched.exceptions import AsyncschedError
from asyncsched.state.placement_mirror.model import (
    SHARING_TRAIT,
    Inventory,
    MirrorState,
    Provider,
)

_PROVIDERS = (
    "SELECT id, uuid, name, generation, root_provider_id, parent_provider_id "
    "FROM resource_providers"
)
_INVENTORIES = (
    "SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, "
    "step_size, allocation_ratio FROM inventories"
)
_TRAITS = "SELECT resource_provider_id, trait_id FROM resource_provider_traits"
_AGGREGATES = (
    "SELECT rpa.resource_provider_id, pa.uuid FROM resource_provider_aggregates rpa "
    "JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id"
)
_PROVIDER_PRINTS = (
    "SELECT COALESCE(array_agg(id ORDER BY id), '{}'), "
    "COALESCE(array_agg(generation ORDER BY id), '{}'), "
    "COALESCE(array_agg(COALESCE(root_provider_id, id) ORDER BY id), '{}'), "
    "COALESCE(array_agg(COALESCE(parent_provider_id, 0) ORDER BY id), '{}'), "
    "COALESCE(array_agg(hashtext(COALESCE(name, '')) ORDER BY id), '{}') "
    "FROM resource_providers"
)
# The same three arrays (and sorts) as PostgreSQL always built, sent in its binary array form
# (``array_send``): numpy reads them whole, without a Python int per value, and two refreshes
# compare as bytes. (A single string of records built per row cost PostgreSQL more than the
# Python it saved: see docs/scale.md.)
_USAGE_PRINTS = (
    "SELECT array_send(COALESCE(array_agg(rp ORDER BY rp, rc), '{}')), "
    "array_send(COALESCE(array_agg(rc ORDER BY rp, rc), '{}')), "
    "array_send(COALESCE(array_agg(n ORDER BY rp, rc), '{}')) "
    "FROM (SELECT resource_provider_id AS rp, resource_class_id AS rc, SUM(used)::bigint AS n "
    "FROM allocations GROUP BY resource_provider_id, resource_class_id) AS u"
)


_CLASS_NAMES = "SELECT id, name FROM resource_classes"
_TRAIT_NAMES = "SELECT id, name FROM traits"


@dataclass(frozen=True, slots=True)
class Names:
    """Placement's internal ids of resource classes and traits, by id."""

    classes: Mapping[int, str]
    traits: Mapping[int, str]


class UsageFormatError(AsyncschedError):
    """PostgreSQL's binary array is not the one-dimensional array without NULLs asked for."""


def _array_values(raw: bytes, size: int) -> npt.NDArray[np.int64]:
    """The values of a one-dimensional int4 (size 4) or int8 (size 8) array in
    ``array_send``'s form: a header, then (length, value) per element."""
    if len(raw) < 12:
        raise UsageFormatError("short array")
    ndim = int.from_bytes(raw[0:4], "big", signed=True)
    if ndim == 0:
        return np.empty(0, dtype=np.int64)
    if ndim != 1 or raw[4:8] != bytes(4):
        raise UsageFormatError("not a one-dimensional array without NULLs")
    rec = np.frombuffer(raw, dtype=np.dtype([("len", ">i4"), ("v", f">i{size}")]), offset=20)
    if len(rec) != int.from_bytes(raw[12:16], "big") or not bool(np.all(rec["len"] == size)):
        raise UsageFormatError("unexpected element lengths")
    return rec["v"].astype(np.int64)


Int64s = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True, eq=False)
class UsageArrays:
    """Summed usage per (provider, class), ordered by both: the query's bytes and columns."""

    raw: bytes
    rp: Int64s
    rc: Int64s
    n: Int64s

    @classmethod
    def decode(cls, rp: bytes, rc: bytes, n: bytes) -> UsageArrays:
        """From the three ``array_send`` values of the usage query."""
        rps, rcs, ns = _array_values(rp, 4), _array_values(rc, 4), _array_values(n, 8)
        if not len(rps) == len(rcs) == len(ns):
            raise UsageFormatError("arrays of different lengths")
        return cls(rp + rc + n, rps, rcs, ns)

    @property
    def keys(self) -> Int64s:
        """(provider << 32) | class: unique and ascending, as the query orders them."""
        return (self.rp << 32) | self.rc

    def classes(self) -> list[int]:
        """The class ids present."""
        return np.flatnonzero(np.bincount(self.rc)).tolist() if len(self.rc) else []


# provider ids, generations, roots, parents, name hashes (by id)
ProviderArrays = tuple[list[int], list[int], list[int], list[int], list[int]]


@dataclass(frozen=True, slots=True)
class Prints:
    """What the previous refresh saw, to compare the next one with."""

    providers: ProviderArrays
    usage: UsageArrays


@dataclass(frozen=True, slots=True)
class RefreshResult:
    state: MirrorState
    names: Names
    changed: int  # providers (re)read in detail
    removed: int
    prints: Prints | None = None


async def _names(conn: asyncpg.Connection) -> Names:
    classes = {r[0]: r[1] for r in await conn.fetch(_CLASS_NAMES)}
    traits = {r[0]: r[1] for r in await conn.fetch(_TRAIT_NAMES)}
    return Names(classes, traits)


async def _details(
    conn: asyncpg.Connection, names: Names, ids: list[int] | None
) -> tuple[dict[int, dict[str, Inventory]], dict[int, set[str]], dict[int, set[str]]]:
    """Inventories, traits and aggregates of ``ids`` (every provider when None)."""
    where = "" if ids is None else " WHERE resource_provider_id = ANY($1::int[])"
    agg_where = "" if ids is None else " WHERE rpa.resource_provider_id = ANY($1::int[])"
    args: tuple[list[int], ...] = () if ids is None else (ids,)
    # Clouds are made of few host types: equal inventories share one value (memory at scale).
    seen: dict[tuple[Any, ...], Inventory] = {}
    inv: dict[int, dict[str, Inventory]] = {}
    for r in await conn.fetch(_INVENTORIES + where, *args):
        key = (r[2], r[3], r[4], r[5], r[6], float(r[7]))
        value = seen.get(key)
        if value is None:
            value = seen[key] = Inventory(*key)
        inv.setdefault(r[0], {})[names.classes[r[1]]] = value
    traits: dict[int, set[str]] = {}
    for r in await conn.fetch(_TRAITS + where, *args):
        traits.setdefault(r[0], set()).add(names.traits[r[1]])
    aggs: dict[int, set[str]] = {}
    for r in await conn.fetch(_AGGREGATES + agg_where, *args):
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


async def read(
    conn: asyncpg.Connection,
    old: MirrorState | None,
    names: Names | None,
    prints: Prints | None = None,
) -> RefreshResult:
    """One refresh inside the caller's transaction: full when ``old`` is None.

    Providers and usage come first as arrays aggregated by PostgreSQL and are compared with
    the previous refresh's as whole lists, so an unchanged cloud costs two rows; rows are
    read only for the providers that changed.
    """
    row = await conn.fetchrow(_PROVIDER_PRINTS)
    arrays: ProviderArrays = (list(row[0]), list(row[1]), list(row[2]), list(row[3]), list(row[4]))
    usage = UsageArrays.decode(*await conn.fetchrow(_USAGE_PRINTS))
    if old is None or prints is None:
        changed: list[int] = list(arrays[0])
        removed: list[int] = []
    else:
        changed, removed = _providers_moved(prints.providers, arrays)
    touched = _usage_touched(prints.usage if prints is not None else None, usage)
    if (
        names is None
        or changed
        or (touched and any(c not in names.classes for c in usage.classes()))
    ):
        names = await _names(conn)
    new = Prints(arrays, usage)
    if old is not None and not changed and not removed and not touched:
        return RefreshResult(old, names, 0, 0, new)
    used = _used_of(usage, names, None if old is None else touched | set(changed))
    providers: dict[int, Provider] = {} if old is None else dict(old.providers)
    for i in removed:
        del providers[i]
    if changed:
        ids = None if old is None else changed
        rows = await conn.fetch(
            _PROVIDERS + ("" if ids is None else " WHERE id = ANY($1::int[])"),
            *(() if ids is None else (ids,)),
        )
        inv, traits, aggs = await _details(conn, names, ids)
        trait_sets, agg_sets = _interned(traits), _interned(aggs)
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
                used=used.get(rp_id, {}),
            )
    fresh = set(changed)
    for rp_id in touched - fresh:
        prev = providers.get(rp_id)
        now = used.get(rp_id, {})
        if prev is not None and prev.used != now:
            providers[rp_id] = replace(prev, used=now)
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
        state = replace(old, providers=providers)  # same trees, uuids and sharing: no rebuild
    else:
        state = MirrorState.build(providers, known_traits, known_classes)
    return RefreshResult(state, names, len(changed), len(removed), new)


def _providers_moved(old: ProviderArrays, new: ProviderArrays) -> tuple[list[int], list[int]]:
    """(changed, removed) provider ids. With the same providers (the usual refresh, claims
    only moving generations) only the arrays that differ are walked, element by element."""
    if old == new:
        return [], []
    ids = new[0]
    if old[0] == ids:
        moved: set[int] = set()
        for before, after in zip(old[1:], new[1:], strict=True):
            if before != after:
                moved.update(i for i, a, b in zip(ids, before, after, strict=True) if a != b)
        return sorted(moved), []
    was = dict(zip(old[0], zip(*old[1:], strict=True), strict=True))
    now = dict(zip(ids, zip(*new[1:], strict=True), strict=True))
    return [i for i, k in now.items() if was.get(i) != k], [i for i in was if i not in now]


def _usage_touched(old: UsageArrays | None, new: UsageArrays) -> set[int]:
    """Providers whose summed usage differs between two usage snapshots (numpy: no Python
    step per sum, only per provider touched)."""
    if old is None:
        return set(np.unique(new.rp).tolist())
    if old.raw == new.raw:
        return set()
    ko, kn = old.keys, new.keys
    if len(ko) == len(kn) and np.array_equal(ko, kn):
        moved = kn[old.n != new.n]
    else:
        common, io, inew = np.intersect1d(ko, kn, assume_unique=True, return_indices=True)
        gone_or_new = np.setxor1d(ko, kn, assume_unique=True)
        moved = np.concatenate([common[old.n[io] != new.n[inew]], gone_or_new])
    return set(np.unique(moved >> 32).tolist())


def _used_of(usage: UsageArrays, names: Names, only: set[int] | None) -> dict[int, dict[str, int]]:
    """Per provider (all, or ``only`` these), usage by resource class name."""
    rp, rc, n = usage.rp, usage.rc, usage.n
    if only is not None:
        at = np.flatnonzero(np.isin(rp, np.fromiter(only, dtype=np.int64, count=len(only))))
        rp, rc, n = rp[at], rc[at], n[at]
    used: dict[int, dict[str, int]] = {}
    classes = names.classes
    for p, c, v in zip(rp.tolist(), rc.tolist(), n.tolist(), strict=True):
        if v:
            used.setdefault(p, {})[classes[c]] = v
    return used


def _same_shape(old: Provider | None, new: Provider) -> bool:
    """Whether ``new`` leaves the state's trees, uuids and nested/sharing classes as they were."""
    if old is None or old.parent_id != new.parent_id or old.root_id != new.root_id:
        return False
    sharing = SHARING_TRAIT in new.traits
    if sharing != (SHARING_TRAIT in old.traits):
        return False
    return (new.is_root and not sharing) or old.inventories.keys() == new.inventories.keys()
