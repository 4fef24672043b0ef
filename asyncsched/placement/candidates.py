"""Candidates: one parsed GET /allocation_candidates answer, indexed by resource provider."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from asyncsched.exceptions import PlacementError
from asyncsched.placement.microversions import CANDIDATES_VERSION


@dataclass(frozen=True, slots=True)
class Candidates:
    """A parsed GET /allocation_candidates answer.

    The dicts are Placement's own JSON objects, shared, not copied: treat them as read-only
    (the claim makes its own shallow payload). ``provider_summaries`` is a read-only mapping:
    the mirror's answers lay a few changed entries over a shared one.
    """

    allocation_requests: list[dict[str, Any]]
    provider_summaries: Mapping[str, Any]
    alloc_reqs_by_rp_uuid: dict[str, list[dict[str, Any]]]
    version: str = CANDIDATES_VERSION
    #: (another answer's ``alloc_reqs_by_rp_uuid``, uuids) when this answer is that one in
    #: its order without those providers, the others' allocation requests the same objects
    #: (the mirror's answers after roots left): a view of that answer's hosts gives this one's
    derived: tuple[dict[str, list[dict[str, Any]]], frozenset[str]] | None = None

    @classmethod
    def parse(cls, body: Mapping[str, Any], version: str = CANDIDATES_VERSION) -> Candidates:
        """One pass over the allocation requests; every rp (root or nested) is indexed."""
        areqs = body.get("allocation_requests")
        summaries = body.get("provider_summaries")
        if not isinstance(areqs, list) or not isinstance(summaries, dict):
            raise PlacementError("Placement's allocation candidates answer is malformed")
        by_rp: dict[str, list[dict[str, Any]]] = {}
        for ar in areqs:
            for rp in ar["allocations"]:
                lst = by_rp.get(rp)
                if lst is None:
                    by_rp[rp] = [ar]
                else:
                    lst.append(ar)
        return cls(areqs, summaries, by_rp, version)

    @classmethod
    def empty(cls) -> Candidates:
        return cls([], {}, {}, CANDIDATES_VERSION)

    def merge(self, other: Candidates) -> Candidates:
        """nova's PCPU fallback: append the other query's requests, merge the summaries."""
        by_rp = {rp: list(v) for rp, v in self.alloc_reqs_by_rp_uuid.items()}
        for rp, lst in other.alloc_reqs_by_rp_uuid.items():
            by_rp.setdefault(rp, []).extend(lst)
        return Candidates(
            self.allocation_requests + other.allocation_requests,
            {**self.provider_summaries, **other.provider_summaries},
            by_rp,
            self.version,
        )

    def __bool__(self) -> bool:
        return bool(self.allocation_requests)
