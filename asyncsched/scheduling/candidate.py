"""HostCandidate: what a filter or weigher sees of one host within one request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from asyncsched.state.host_state import HostState


@dataclass(slots=True, eq=False)
class HostCandidate:
    """A host as one request sees it: the shared state plus request-local data.

    ``allocation_candidates`` are this node's Placement allocation requests (filters may prune
    them, nova's CandidateFilterMixin); ``limits`` is what filters put in Selection.limits
    (today only ``numa_topology``).
    """

    state: HostState
    allocation_candidates: list[dict[str, Any]] = field(default_factory=list)
    limits: dict[str, Any] = field(default_factory=dict)
