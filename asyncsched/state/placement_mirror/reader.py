"""Reading Placement's database: a full load, then cheap refreshes of what moved.

Placement bumps a provider's ``generation`` on every inventory, trait, aggregate and
allocation write, so the (id, generation, root, parent, name hash) of every provider, which
PostgreSQL aggregates into arrays (one row), name the providers whose rows, inventories,
traits and aggregates must be read again. ``DELETE /allocations/{consumer}`` does not touch
any generation, so usage is read on its own, summed per provider and class over the index
Placement keeps for that (``allocations_resource_provider_class_used_idx``), also as arrays.
Comparing those lists with the previous refresh's is a C-level list comparison when nothing
moved, so an idle 10,000-provider cloud costs two rows and almost no CPU here. Every read of
one refresh runs in one read-only REPEATABLE READ transaction: one instant of Placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

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
_USAGE_PRINTS = (
    "SELECT COALESCE(array_agg(rp ORDER BY rp, rc), '{}'), "
    "COALESCE(array_agg(rc ORDER BY rp, rc), '{}'), COALESCE(array_agg(n ORDER BY rp, rc), '{}') "
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


UsageArrays = tuple[list[int], list[int], list[int]]  # provider ids, class ids, sums
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
    urow = await conn.fetchrow(_USAGE_PRINTS)
    usage = (list(urow[0]), list(urow[1]), list(urow[2]))
    if old is None or prints is None:
        changed: list[int] = list(arrays[0])
        removed: list[int] = []
    else:
        changed, removed = _providers_moved(prints.providers, arrays)
    touched = _usage_touched(prints.usage if prints is not None else None, usage)
    if names is None or changed or any(rc not in names.classes for rc in set(usage[1])):
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
    """Providers whose summed usage differs between two usage snapshots."""
    if old is None:
        return set(new[0])
    if old == new:
        return set()
    if old[0] == new[0] and old[1] == new[1]:
        return {rp for rp, a, b in zip(new[0], old[2], new[2], strict=True) if a != b}
    before = set(zip(*old, strict=True))
    after = set(zip(*new, strict=True))
    return {t[0] for t in before ^ after}


def _used_of(usage: UsageArrays, names: Names, only: set[int] | None) -> dict[int, dict[str, int]]:
    """Per provider (all, or ``only`` these), usage by resource class name."""
    used: dict[int, dict[str, int]] = {}
    for rp, rc, n in zip(*usage, strict=True):
        if n and (only is None or rp in only):
            used.setdefault(rp, {})[names.classes[rc]] = int(n)
    return used


def _same_shape(old: Provider | None, new: Provider) -> bool:
    """Whether ``new`` leaves the state's trees, uuids and nested/sharing classes as they were."""
    if old is None or old.parent_id != new.parent_id or old.root_id != new.root_id:
        return False
    sharing = SHARING_TRAIT in new.traits
    if sharing != (SHARING_TRAIT in old.traits):
        return False
    return (new.is_root and not sharing) or old.inventories.keys() == new.inventories.keys()
