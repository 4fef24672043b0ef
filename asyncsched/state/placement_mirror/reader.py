"""Reading Placement's database: a full load, then cheap refreshes of what moved.

Placement bumps a provider's ``generation`` on every inventory, trait, aggregate and
allocation write, so one scan of ``resource_providers`` names the providers whose details
must be read again. ``DELETE /allocations/{consumer}`` does not touch any generation, so usage
is read on its own, summed per provider and class over the index Placement keeps for that
(``allocations_resource_provider_class_used_idx``). Every read of one refresh runs in one
read-only REPEATABLE READ transaction: the state it builds is one instant of Placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
_USAGE = (
    "SELECT resource_provider_id, resource_class_id, SUM(used)::bigint "
    "FROM allocations GROUP BY resource_provider_id, resource_class_id"
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
_CLASS_NAMES = "SELECT id, name FROM resource_classes"
_TRAIT_NAMES = "SELECT id, name FROM traits"


@dataclass(frozen=True, slots=True)
class Names:
    """Placement's internal ids of resource classes and traits, by id."""

    classes: Mapping[int, str]
    traits: Mapping[int, str]


@dataclass(frozen=True, slots=True)
class RefreshResult:
    state: MirrorState
    names: Names
    changed: int  # providers (re)read in detail
    removed: int


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


def _needs_names(names: Names | None, ids: Iterable[int], table: Mapping[int, str]) -> bool:
    return names is None or any(i not in table for i in ids)


async def read(
    conn: asyncpg.Connection, old: MirrorState | None, names: Names | None
) -> RefreshResult:
    """One refresh inside the caller's transaction: full when ``old`` is None."""
    rows = await conn.fetch(_PROVIDERS)
    usage_rows = await conn.fetch(_USAGE)
    changed: list[int] = []
    if old is None:
        ids: list[int] | None = None
    else:
        for r in rows:
            p = old.providers.get(r[0])
            if (
                p is None
                or p.generation != r[3]
                or p.root_id != r[4]
                or p.parent_id != r[5]
                or p.name != r[2]
            ):
                changed.append(r[0])
        ids = changed
    if names is None or changed or _needs_names(names, (r[1] for r in usage_rows), names.classes):
        names = await _names(conn)
    providers: dict[int, Provider] = {}
    if ids is None or ids:
        inv, traits, aggs = await _details(conn, names, ids)
    else:
        inv, traits, aggs = {}, {}, {}
    trait_sets, agg_sets = _interned(traits), _interned(aggs)
    used: dict[int, dict[str, int]] = {}
    for r in usage_rows:
        if r[2]:
            used.setdefault(r[0], {})[names.classes[r[1]]] = int(r[2])
    fresh = set(changed) if old is not None else None
    for r in rows:
        rp_id = r[0]
        if fresh is not None and rp_id not in fresh and old is not None:
            prev = old.providers[rp_id]
            now = used.get(rp_id, {})
            providers[rp_id] = prev if prev.used == now else replace(prev, used=now)
            continue
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
    removed = 0 if old is None else sum(1 for i in old.providers if i not in providers)
    known_traits = frozenset(names.traits.values())
    known_classes = frozenset(names.classes.values())
    if (
        old is not None
        and not removed
        and len(providers) == len(old.providers)
        and all(p is old.providers.get(i) for i, p in providers.items())
        and old.known_traits == known_traits
        and old.known_classes == known_classes
    ):
        state = old  # nothing moved: readers keep whatever they built over it
    elif (
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
    return RefreshResult(state, names, len(changed) if old is not None else len(rows), removed)


def _same_shape(old: Provider | None, new: Provider) -> bool:
    """Whether ``new`` leaves the state's trees, uuids and nested/sharing classes as they were."""
    if old is None or old.parent_id != new.parent_id or old.root_id != new.root_id:
        return False
    sharing = SHARING_TRAIT in new.traits
    if sharing != (SHARING_TRAIT in old.traits):
        return False
    return (new.is_root and not sharing) or old.inventories.keys() == new.inventories.keys()
