"""What the mirror holds of Placement: providers with inventories, traits and aggregates.

Values are frozen; a refresh builds a new :class:`MirrorState` that shares the providers it
did not change, so a reader holding one state sees one consistent snapshot of Placement.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from asyncsched.common.capacity import usable

SHARING_TRAIT = "MISC_SHARES_VIA_AGGREGATE"
_SERIALS = itertools.count(1)


#: how many earlier states a state made by ``with_providers`` names what moved since (at a
#: refresh every 0.5 s, the last 16 s): an answer kept for a flavor not asked for meanwhile
#: is brought up to date from the state it was made on, not built anew
SINCE_DEPTH = 32


def _serial() -> int:
    return next(_SERIALS)


@dataclass(frozen=True, slots=True)
class Inventory:
    """One row of Placement's ``inventories`` table (resource class by name)."""

    total: int
    reserved: int
    min_unit: int
    max_unit: int
    step_size: int
    allocation_ratio: float

    @property
    def limit(self) -> float:
        """What allocations of the class may sum to (``common.capacity.usable``)."""
        return usable(self.total, self.reserved, self.allocation_ratio)

    @property
    def capacity(self) -> int:
        """Placement's own rule: ``int((total - reserved) * allocation_ratio)``."""
        return int(self.limit)

    def fits(self, used: int, amount: int) -> bool:
        """Placement's capacity clause for one resource class of one provider."""
        return (
            used + amount <= self.limit
            and self.min_unit <= amount <= self.max_unit
            and amount % self.step_size == 0
        )


@dataclass(frozen=True, slots=True)
class Provider:
    """One resource provider as Placement's database has it."""

    id: int
    uuid: str
    name: str | None
    generation: int
    root_id: int
    parent_id: int | None
    inventories: Mapping[str, Inventory] = field(default_factory=dict)
    traits: frozenset[str] = frozenset()
    aggregates: frozenset[str] = frozenset()
    #: sum of allocations per resource class (a new Provider value whenever it changes, so an
    #: unchanged provider keeps its identity from one refresh to the next)
    used: Mapping[str, int] = field(default_factory=dict)

    @property
    def is_root(self) -> bool:
        return self.parent_id is None

    def over_capacity(self) -> dict[str, tuple[int, int]]:
        """``class -> (used, capacity)`` where the allocations exceed Placement's capacity
        (concurrent claims it let through, or an inventory lowered under its allocations)."""
        out: dict[str, tuple[int, int]] = {}
        for rc, used in self.used.items():
            inv = self.inventories.get(rc)
            if inv is not None and used > inv.limit:
                out[rc] = (used, inv.capacity)
        return out


@dataclass(frozen=True, slots=True)
class MirrorState:
    """One consistent snapshot of Placement: providers by internal id."""

    providers: Mapping[int, Provider]
    by_uuid: Mapping[str, int]
    #: members (ids) of each tree with more than one provider, by root id
    trees: Mapping[int, tuple[int, ...]]
    #: resource classes some non-root provider has inventory of
    nested_classes: frozenset[str]
    #: resource classes some sharing provider (MISC_SHARES_VIA_AGGREGATE) has inventory of
    shared_classes: frozenset[str]
    has_sharing: bool
    known_traits: frozenset[str]
    known_classes: frozenset[str]
    #: this state's number; and, for a state made from others by replacing some providers'
    #: values (same providers, trees, uuids and sharing), newest first, up to ``SINCE_DEPTH``
    #: of them: each earlier state's number and the ids of the providers replaced in the
    #: step from it to the next, so what is kept per state (columns, answers) redoes only those
    serial: int = field(default_factory=_serial)
    since: tuple[tuple[int, frozenset[int]], ...] = ()

    def with_providers(
        self, providers: Mapping[int, Provider], moved: Iterable[int]
    ) -> MirrorState:
        """This state with ``providers`` (the same ids, trees, uuids and sharing as here),
        of which those in ``moved`` may differ."""
        chain = ((self.serial, frozenset(moved)), *self.since[: SINCE_DEPTH - 1])
        return replace(self, providers=providers, serial=_serial(), since=chain)

    def moved_since(self, other: MirrorState) -> frozenset[int] | None:
        """The providers that may differ from ``other`` when this state was made from it
        by :meth:`with_providers`, directly or through at most ``SINCE_DEPTH`` states; None
        when that is not known."""
        for n, (serial, _) in enumerate(self.since):
            if serial == other.serial:
                steps = [ids for _, ids in self.since[: n + 1]]
                return steps[0] if n == 0 else frozenset().union(*steps)
        return None

    @classmethod
    def build(
        cls,
        providers: Mapping[int, Provider],
        known_traits: frozenset[str],
        known_classes: frozenset[str],
    ) -> MirrorState:
        trees: dict[int, list[int]] = {}
        nested: set[str] = set()
        shared: set[str] = set()
        has_sharing = False
        for p in providers.values():
            if not p.is_root:
                nested.update(p.inventories)
                trees.setdefault(p.root_id, [p.root_id]).append(p.id)
            if SHARING_TRAIT in p.traits:
                has_sharing = True
                shared.update(p.inventories)
        return cls(
            providers=providers,
            by_uuid={p.uuid: p.id for p in providers.values()},
            trees={root: tuple(ids) for root, ids in trees.items()},
            nested_classes=frozenset(nested),
            shared_classes=frozenset(shared),
            has_sharing=has_sharing,
            known_traits=known_traits,
            known_classes=known_classes,
        )

    @property
    def has_trees(self) -> bool:
        return bool(self.trees)

    def tree_of(self, root_id: int) -> tuple[int, ...]:
        return self.trees.get(root_id, (root_id,))
