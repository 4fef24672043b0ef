"""Why hosts were dropped: per-request reason counts, one DEBUG line, the last N kept."""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RequestSummary:
    """One select_destinations call as a later diagnosis feature needs it."""

    request_id: str | None
    candidates: int  # hosts handed to the filters for the first instance
    reasons: dict[str, dict[str, int]]  # filter name -> reason code -> hosts dropped
    selected: tuple[str, ...] = ()  # compute node uuids, one per placed instance
    outcome: str = "ok"  # ok | NoValidHost: <reason> | error: <type>
    at: float = field(default_factory=time.time)

    def line(self) -> str:
        """``1000 candidates: ComputeFilter -3 (disabled 3) ... -> ok``."""
        parts = [f"{self.candidates} candidates:"]
        for name, codes in self.reasons.items():
            total = sum(codes.values())
            detail = ", ".join(f"{code} {n}" for code, n in sorted(codes.items()))
            parts.append(f"{name} -{total} ({detail})")
        parts.append(f"-> {self.outcome}")
        return " ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "candidates": self.candidates,
            "reasons": self.reasons,
            "selected": list(self.selected),
            "outcome": self.outcome,
            "at": self.at,
        }


class Diagnostics:
    """A bounded ring of recent summaries (no I/O, no locks: one event loop)."""

    def __init__(self, size: int = 256) -> None:
        self._recent: deque[RequestSummary] = deque(maxlen=size)

    def record(self, summary: RequestSummary) -> None:
        self._recent.append(summary)

    def recent(self) -> list[RequestSummary]:
        return list(self._recent)

    def find(self, request_id: str) -> RequestSummary | None:
        """The latest summary of ``request_id`` still kept, if any."""
        for summary in reversed(self._recent):
            if summary.request_id == request_id:
                return summary
        return None

    @staticmethod
    def freeze(reasons: dict[str, Counter[str]]) -> dict[str, dict[str, int]]:
        return {name: dict(codes) for name, codes in reasons.items() if codes}
