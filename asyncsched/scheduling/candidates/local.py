"""``GET /allocation_candidates`` answered from the Placement mirror, for the shapes it can
answer exactly.

The shape is the ordinary compute-node request: one unsuffixed group with resources, each
requested class offered only by root providers and by no sharing provider, so every candidate
is one root holding the whole request. Placement's rules for it, read from its
``research_context`` and ``allocation_candidate`` modules:

- a class fits when ``used + amount <= (total - reserved) * allocation_ratio`` and
  ``min_unit <= amount <= max_unit`` and ``amount % step_size == 0``;
- required traits all on the provider, forbidden ones absent; ``member_of`` lists each need
  one aggregate of the provider, ``!in:`` aggregates none; ``in_tree`` names the tree;
- ``root_required`` / ``root_forbidden`` filter by the root's traits;
- ``provider_summaries`` (1.36) has every provider of each candidate's tree, and only of
  those (``_merge_candidates`` trims them to the trees of the allocation requests): capacity
  ``int((total - reserved) * ratio)`` and used of every class it has inventory of, its traits,
  parent and root uuids. ``mappings`` is ``{"": [rp]}``.

No ``limit``: every matching host is returned (Placement's limit spares Placement, and a
random thousand may not hold the best host). Anything else returns the reason it is left to
Placement.
"""

from __future__ import annotations

import operator
from collections.abc import Generator, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from asyncsched.common import heap
from asyncsched.common.recent import Recent
from asyncsched.objects.models import RequestGroup
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.microversions import CANDIDATES_VERSION
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import columns as build
from asyncsched.scheduling.candidates.columns import BoolArray, IntArray, RootColumns
from asyncsched.scheduling.columns import drained, stepped
from asyncsched.state.placement_mirror import MirrorState, Provider

Pending = Mapping[str, Mapping[str, int]]  # rp uuid -> class -> amount claimed, not yet seen
#: answers (without this process's pending claims) kept, by query string, each with its state
ANSWERS = 8
#: request shapes (amounts per class) whose allocation requests are kept for reuse: as many
#: as answers (a kept answer holds its shape's requests anyway; a shape dropped while its
#: answer is kept made three new objects a root at its next build, and both stayed alive)
AREQ_SHAPES = ANSWERS
#: container objects kept per allocation request made (it, its allocations, its index list)
#: and per summary made (it, its resources, its traits, one per class: three classes here)
AREQ_OBJECTS, SUMMARY_OBJECTS = 3, 6
Answer = tuple[Candidates, BoolArray, list[Provider]]
_FIRST = operator.itemgetter(0)
#: a build in steps: it yields where the loop may take a turn, and returns its value
Steps = Generator[None, None, Any]


@dataclass(frozen=True, slots=True)
class Fallback:
    """The request is not one the mirror answers exactly: ask Placement, for this reason."""

    reason: str


def shape(request: ResourceRequest, state: MirrorState) -> RequestGroup | Fallback:
    """The one group the mirror can answer, or why Placement must."""
    groups = request.groups
    if len(groups) != 1 or groups[0].requester_id or groups[0].use_same_provider:
        return Fallback("granular request groups")
    if request.same_subtree:
        return Fallback("same_subtree")
    g = groups[0]
    if not g.resources:
        return Fallback("resourceless request group")
    for rc in g.resources:
        if rc not in state.known_classes:
            return Fallback(f"resource class {rc} unknown to the mirror")
        if rc in state.nested_classes:
            return Fallback(f"{rc} offered by a nested provider")
        if rc in state.shared_classes:
            return Fallback(f"{rc} offered by a sharing provider")
    traits = g.required_traits | g.forbidden_traits | request.root_required | request.root_forbidden
    unknown = traits - state.known_traits
    if unknown:
        return Fallback(f"trait {sorted(unknown)[0]} unknown to the mirror")
    if g.in_tree is not None and g.in_tree not in state.by_uuid:
        return Fallback("in_tree provider unknown to the mirror")
    return g


class LocalCandidates:
    """Computes candidates over a state: numpy columns of the roots for the current state, and
    each provider's summary for as long as the provider value is unchanged (the mirror keeps a
    provider's identity until Placement changes it), so a request over 10,000 hosts builds
    only what moved."""

    def __init__(self, *, reuse_answers: bool = True) -> None:
        self._reuse = reuse_answers
        self.patched = 0  # answers brought from the previous state instead of built anew
        self._columns: RootColumns | None = None
        # per query string, the answer without pending claims and the state it is for
        self._kept: Recent[str, tuple[MirrorState, Answer]] = Recent(ANSWERS)
        self._summaries: dict[int, tuple[Provider, dict[str, Any]]] = {}
        # allocation requests by requested amounts (flavors repeat), then by provider uuid
        self._areqs: Recent[tuple[tuple[str, int], ...], dict[str, list[dict[str, Any]]]] = (
            Recent(AREQ_SHAPES)
        )
        # each root's allocation requests' mappings, shared by every shape
        self._mappings: dict[str, dict[str, list[str]]] = {}
        # the last answer's roots dropped for pending claims, kept while they stay the same
        self._dropping = Dropping()

    def columns(self, state: MirrorState) -> RootColumns:
        cols = self._columns
        if cols is None or cols.state is not state:
            cols = self._columns = RootColumns(state) if cols is None else cols.follow(state)
            if len(self._summaries) > 2 * len(state.providers) + 64:
                live = state.providers
                self._summaries = {i: v for i, v in self._summaries.items() if i in live}
        return cols

    def compute(
        self, state: MirrorState, request: ResourceRequest, pending: Pending | None = None
    ) -> Candidates | Fallback:
        """The answer, built in one piece (no event loop needed)."""
        got: Candidates | Fallback = drained(self._steps(state, request, pending))
        return got

    async def compute_async(
        self, state: MirrorState, request: ResourceRequest, pending: Pending | None = None
    ) -> Candidates | Fallback:
        """The same answer as :meth:`compute`, giving the event loop a turn every
        ``columns.BUILD_CHUNK`` roots of a full build (issue #24: no hold of 100 ms at
        100,000 roots)."""
        got: Candidates | Fallback = await stepped(self._steps(state, request, pending))
        return got

    def _steps(
        self, state: MirrorState, request: ResourceRequest, pending: Pending | None
    ) -> Steps:
        g = shape(request, state)
        if isinstance(g, Fallback):
            return g
        pending = pending or {}
        if self._reuse:
            return (yield from self._reused(state, request, g, pending))
        return (yield from self._compute(state, request, g, pending))[0]

    def _reused(
        self, state: MirrorState, request: ResourceRequest, g: RequestGroup, pending: Pending
    ) -> Steps:
        """The state's answer for this query (computed once per state, with no pending claim),
        patched with this process's pending claims: a request over 10,000 unchanged hosts
        then costs what the pending claims touch, not a pass over every host. The last
        ``ANSWERS`` queries' answers are kept, each with the state it is for: on a newer
        state (every refresh while claims land) it is patched with the roots that changed
        since, however many refreshes ago it was made (a mix of flavors: each one's answer
        is brought up to date, not built anew), unless a root joined the answer (then it is
        built anew, in order).

        A build may give the loop turns: another request may keep an answer for the same
        query meanwhile; the one for the newer state stays."""
        key = request.to_querystring()
        hit = self._kept.peek(key)
        kept: Answer | None = None
        if hit is not None:
            made_on, before = hit
            if made_on is state:
                kept = before
            else:
                kept = self._patched(made_on, state, request, g, before)
                self.patched += kept is not None
        if kept is None:
            kept = yield from self._compute(state, request, g, {})
        # another request may have kept one meanwhile, or be on a newer state: the newer stays
        have = self._kept.peek(key)
        if have is None or have[0].serial <= state.serial:
            have = (state, kept)
        self._kept.put(key, have)
        base = kept[0]
        return with_pending(state, base, g, pending, self._dropping) if pending else base

    def _mask(
        self, state: MirrorState, request: ResourceRequest, g: RequestGroup, pending: Pending
    ) -> tuple[RootColumns, BoolArray, tuple[tuple[str, int], ...]]:
        """The roots that can hold the whole request, as a mask over the state's columns."""
        wanted = tuple(sorted(g.resources.items()))
        cols = self.columns(state)
        mask = _fit(cols, state, request, g)
        for uuid, mine in pending.items():  # claimed here, not yet in the state: check again
            rp_id = state.by_uuid.get(uuid)
            row = cols.row.get(rp_id) if rp_id is not None else None
            if row is not None and mask[row]:
                p = cols.roots[row]
                for rc, amount in wanted:
                    inv = p.inventories[rc]
                    if not inv.fits(p.used.get(rc, 0) + mine.get(rc, 0), amount):
                        mask[row] = False
                        break
        return cols, mask, wanted

    def _compute(
        self, state: MirrorState, request: ResourceRequest, g: RequestGroup, pending: Pending
    ) -> Steps:
        """The full answer (an :data:`Answer`), in steps."""
        if self._columns is None:  # the first request: the columns built in steps too
            cols = yield from RootColumns.built(state)
            if self._columns is None:  # else another request built them meanwhile
                self._columns = cols
        yield from self.columns(state).prepare(sorted(g.resources))
        cols, mask, wanted = self._mask(state, request, g, pending)
        roots = cols.roots
        anchored = [roots[i] for i in np.flatnonzero(mask).tolist()]
        got = yield from self._candidates(state, anchored, wanted, pending)
        return got, mask, roots

    def _mask_after(
        self,
        prior_state: MirrorState,
        state: MirrorState,
        request: ResourceRequest,
        g: RequestGroup,
        old_mask: BoolArray,
    ) -> tuple[RootColumns, BoolArray, IntArray]:
        """The request's mask over ``state`` and the rows that may differ from ``old_mask``
        (its mask over ``prior_state``): when the mirror names the providers replaced, only
        their rows are judged again (a refresh under claims: a few of 100,000); else every
        row."""
        moved = state.moved_since(prior_state)
        cols = self.columns(state)
        if moved is None or len(old_mask) != len(cols):
            cols, mask, _ = self._mask(state, request, g, {})
            return cols, mask, np.arange(len(mask), dtype=np.intp)
        row = cols.row
        rows = np.array(sorted(r for i in moved if (r := row.get(i)) is not None), dtype=np.intp)
        mask = old_mask.copy()
        mask[rows] = _fit(cols, state, request, g, rows)
        return cols, mask, rows

    def _patched(
        self,
        prior_state: MirrorState,
        state: MirrorState,
        request: ResourceRequest,
        g: RequestGroup,
        before: Answer,
    ) -> Answer | None:
        """``before`` (the answer over ``prior_state``) brought to ``state``: the roots that
        left are dropped, the changed ones that stay get new summaries. None when that is
        not the same answer as a fresh one (trees, other roots, a root that joined)."""
        old, old_mask, old_roots = before
        if state.has_trees or prior_state.has_trees:
            return None
        cols, mask, rows = self._mask_after(prior_state, state, request, g, old_mask)
        roots = cols.roots
        if len(roots) != len(old_roots) or len(mask) != len(old_mask):
            return None
        if (mask[rows] & ~old_mask[rows]).any():
            return None  # a root joined: its place in the answer's order needs a full build
        changed = [i for i in rows[mask[rows]].tolist() if roots[i] is not old_roots[i]]
        if any(roots[i].id != old_roots[i].id for i in changed):
            return None
        left = rows[old_mask[rows] & ~mask[rows]].tolist()
        if not left and not changed:
            return old, mask, roots  # the same answer (a frozen value): shared as it is
        # No root left: the same allocation requests objects, so the scheduler's host view
        # (kept per alloc_reqs_by_rp_uuid object) holds across the refresh.
        areqs, by_rp = old.allocation_requests, old.alloc_reqs_by_rp_uuid
        gone = [old_roots[i].uuid for i in left]
        if gone:
            areqs, by_rp = _without_roots(old, gone)
        cache = self._summaries
        patch: dict[str, Any] = {}
        for i in changed:
            p = roots[i]
            hit = cache.get(p.id)
            if hit is None or hit[0] is not p:
                hit = cache[p.id] = (p, summary(state, p))
            patch[p.uuid] = hit[1]
        summaries = PatchedSummaries.over(old.provider_summaries, patch, gone)
        derived = (old.alloc_reqs_by_rp_uuid, frozenset(gone)) if gone else None
        return Candidates(areqs, summaries, by_rp, old.version, derived), mask, roots

    def _candidates(
        self,
        state: MirrorState,
        anchored: list[Provider],
        wanted: tuple[tuple[str, int], ...],
        pending: Pending,
    ) -> Steps:
        """The :class:`Candidates` of ``anchored`` in their order, a step every
        ``columns.BUILD_CHUNK`` roots."""
        made = self._areqs.get(wanted)
        if made is None:
            made = {}
            self._areqs.put(wanted, made)
        # Read-only, so shared: one {"resources": ...} per build, one mappings value per
        # root for every shape (an answer per flavor, 100,000 roots: half the objects each)
        held = {"resources": dict(wanted)}
        mappings = self._mappings
        areqs: list[dict[str, Any]] = []
        by_rp: dict[str, list[dict[str, Any]]] = {}
        summaries: dict[str, Any] = {}
        providers, cache, trees = state.providers, self._summaries, state.has_trees
        made_here = 0  # objects this build made that live on, told to the heap's keeper
        for n, root in enumerate(anchored, 1):
            if n % build.BUILD_CHUNK == 0:
                heap.KEEPER.made(made_here)
                made_here = 0
                yield
            u = root.uuid
            one = made.get(u)
            if one is None:
                m = mappings.get(u)
                if m is None:
                    m = mappings[u] = {"": [u]}
                one = made[u] = [{"allocations": {u: held}, "mappings": m}]
                made_here += AREQ_OBJECTS
            areqs.append(one[0])
            by_rp[u] = one
            for rp_id in state.tree_of(root.id) if trees else (root.id,):
                p = providers[rp_id]
                hit = cache.get(rp_id)
                if hit is None or hit[0] is not p:
                    hit = cache[rp_id] = (p, summary(state, p))
                    made_here += SUMMARY_OBJECTS
                mine = pending.get(p.uuid)
                summaries[p.uuid] = plus_pending(hit[1], mine) if mine else hit[1]
        heap.KEEPER.made(made_here)
        if len(anchored) >= build.BUILD_CHUNK:
            yield  # the last chunk's work ends a step: the caller's next piece starts afresh
        return Candidates(areqs, summaries, by_rp, CANDIDATES_VERSION)


def _fit(
    cols: RootColumns,
    state: MirrorState,
    request: ResourceRequest,
    g: RequestGroup,
    rows: IntArray | None = None,
) -> BoolArray:
    """The roots (all, or those at ``rows``) that can hold the whole request by their own
    values: capacity of each class, traits, aggregates, tree."""

    def at(full: BoolArray) -> BoolArray:
        return full if rows is None else full[rows]

    mask = np.ones(len(cols) if rows is None else len(rows), dtype=bool)
    if g.in_tree is not None:
        only = cols.row.get(state.providers[state.by_uuid[g.in_tree]].root_id)
        tree = np.zeros(len(cols), dtype=bool)
        if only is not None:
            tree[only] = True
        mask &= at(tree)
    for rc, amount in sorted(g.resources.items()):
        mask &= cols.resource(rc).fits(amount, rows)
    for t in g.required_traits | request.root_required:  # the root is the provider
        mask &= at(cols.trait(t))
    for t in g.forbidden_traits | request.root_forbidden:
        mask &= ~at(cols.trait(t))
    for any_of in g.aggregates:
        member = np.zeros(len(mask), dtype=bool)
        for agg in any_of:
            member |= at(cols.aggregate(agg))
        mask &= member
    for agg in g.forbidden_aggregates:
        mask &= ~at(cols.aggregate(agg))
    return mask


def _without_roots(
    answer: Candidates, gone: list[str]
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """``answer``'s allocation requests and their index without those of the roots ``gone``
    (new objects: ``answer`` is shared). No trees: one allocation request per root, in the
    index's order, so both come from the index by C-level passes."""
    by_rp = dict(answer.alloc_reqs_by_rp_uuid)
    for u in gone:
        by_rp.pop(u, None)
    return list(map(_FIRST, by_rp.values())), by_rp


def summary(state: MirrorState, p: Provider) -> dict[str, Any]:
    """One provider's entry in ``provider_summaries`` at microversion 1.36 (shared, read-only)."""
    used = p.used
    parent = state.providers[p.parent_id].uuid if p.parent_id is not None else None
    return {
        "resources": {
            rc: {"capacity": inv.capacity, "used": used.get(rc, 0)}
            for rc, inv in p.inventories.items()
        },
        "traits": sorted(p.traits),
        "parent_provider_uuid": parent,
        "root_provider_uuid": state.providers[p.root_id].uuid,
    }


def plus_pending(shown: Mapping[str, Any], pending: Mapping[str, int]) -> dict[str, Any]:
    """A provider's summary with ``pending`` amounts added to its usage (traits and tree
    shared with the summary it is made from)."""
    return {
        **shown,
        "resources": {
            rc: {"capacity": r["capacity"], "used": r["used"] + pending.get(rc, 0)}
            for rc, r in shown["resources"].items()
        },
    }


@dataclass(slots=True)
class Dropping:
    """The roots :func:`with_pending` last dropped from one base answer, and what dropping
    them made: while the next request drops the same roots from the same answer it gets the
    same allocation requests objects (no pass over the answer's hosts, and the scheduler's
    view of the hosts, kept per ``alloc_reqs_by_rp_uuid`` object, still holds)."""

    base: Candidates | None = None
    gone: frozenset[str] = frozenset()
    areqs: list[dict[str, Any]] | None = None
    by_rp: dict[str, list[dict[str, Any]]] | None = None
    dropped: frozenset[str] = frozenset()

    def made(
        self, base: Candidates, gone: frozenset[str]
    ) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], frozenset[str]] | None:
        if self.base is base and self.gone == gone and self.areqs is not None:
            assert self.by_rp is not None
            return self.areqs, self.by_rp, self.dropped
        return None


def with_pending(
    state: MirrorState,
    base: Candidates,
    g: RequestGroup,
    pending: Pending,
    dropping: Dropping | None = None,
) -> Candidates:
    """``base`` (the answer with no pending claim) as :meth:`LocalCandidates.compute` answers
    with ``pending``: an anchored root the pending amounts no longer fit is dropped with its
    tree, and every shown provider with pending amounts gets a summary including them.

    The work is per pending provider; dropping roots costs a pass over the answer, once per
    set of roots dropped when ``dropping`` keeps it (the same set: the same objects again)."""
    by_rp, summaries = base.alloc_reqs_by_rp_uuid, base.provider_summaries
    providers = state.providers
    wanted = g.resources.items()
    gone: list[str] = []
    for uuid, mine in pending.items():
        if uuid not in by_rp:
            continue
        p = providers[state.by_uuid[uuid]]
        for rc, amount in wanted:
            if not p.inventories[rc].fits(p.used.get(rc, 0) + mine.get(rc, 0), amount):
                gone.append(uuid)
                break
    shown = [u for u in pending if u in summaries]
    if not gone and not shown:
        return base
    # the same allocation requests object while no root is gone: the scheduler keeps its
    # view of the hosts for as long as that object stands
    areqs, new_by_rp = base.allocation_requests, by_rp
    dropped: frozenset[str] = frozenset()
    if gone:
        gone_set = frozenset(gone)
        made = dropping.made(base, gone_set) if dropping is not None else None
        if made is None:
            made = _drop(state, base, gone_set)
            if dropping is not None:
                dropping.base, dropping.gone = base, gone_set
                dropping.areqs, dropping.by_rp, dropping.dropped = made
        areqs, new_by_rp, dropped = made
    patch = {u: plus_pending(summaries[u], pending[u]) for u in shown if u not in dropped}
    # the same object as base's while no root is gone: what base is derived from, this is
    derived = (by_rp, dropped) if dropped else base.derived
    return Candidates(
        areqs, PatchedSummaries(summaries, patch, dropped), new_by_rp, base.version, derived
    )


def _drop(
    state: MirrorState, base: Candidates, gone: frozenset[str]
) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]], frozenset[str]]:
    """``base``'s allocation requests without the roots ``gone`` (and their trees)."""
    providers, summaries = state.providers, base.provider_summaries
    new_by_rp = dict(base.alloc_reqs_by_rp_uuid)
    left: set[int] = set()
    dropped: set[str] = set()
    for uuid in gone:
        left.update(id(a) for a in new_by_rp.pop(uuid))
        for rp_id in state.tree_of(state.by_uuid[uuid]):
            if (u := providers[rp_id].uuid) in summaries:
                dropped.add(u)
    areqs = [a for a in base.allocation_requests if id(a) not in left]
    return areqs, new_by_rp, frozenset(dropped)


class PatchedSummaries(Mapping[str, Any]):
    """``base`` with the entries of ``patch`` replacing its own and those in ``dropped``
    gone, without copying it: a request with pending claims differs from the shared answer
    of 10,000 providers in a few. ``patch`` and ``dropped`` hold keys of ``base`` only."""

    __slots__ = ("_base", "_dropped", "_patch")

    def __init__(
        self, base: Mapping[str, Any], patch: dict[str, Any], dropped: frozenset[str]
    ) -> None:
        self._base, self._patch, self._dropped = base, patch, dropped

    @classmethod
    def over(
        cls, old: Mapping[str, Any], patch: dict[str, Any], gone: Iterable[str]
    ) -> Mapping[str, Any]:
        """``old`` with ``patch`` (keys of ``old``) laid over it and ``gone`` left out, in
        ``old``'s order, without copying its entries: a refresh changes a few providers of
        100,000. One layer deep (``old``'s own layer is merged into the new one); flattened
        into a dict once the layer passes a sixteenth of the base (amortised)."""
        base, dropped = old, frozenset(gone)
        if isinstance(old, PatchedSummaries):
            base, patch, dropped = old._base, {**old._patch, **patch}, old._dropped | dropped
        for u in dropped.intersection(patch):
            del patch[u]
        if (len(patch) + len(dropped)) * 16 <= len(base):
            return cls(base, patch, dropped)
        flat = {u: v for u, v in base.items() if u not in dropped}
        flat.update(patch)
        return flat

    def __getitem__(self, key: str) -> Any:
        if key in self._patch:
            return self._patch[key]
        if key in self._dropped:
            raise KeyError(key)
        return self._base[key]

    def __contains__(self, key: object) -> bool:
        return key not in self._dropped and key in self._base

    def __iter__(self) -> Iterator[str]:
        dropped = self._dropped
        return iter(self._base) if not dropped else (k for k in self._base if k not in dropped)

    def __len__(self) -> int:
        return len(self._base) - len(self._dropped)
