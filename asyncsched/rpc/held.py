"""The byte budget of held requests (``[asyncsched] max_held_bytes``, issue #21 item 8).

The prefetch bounds how many requests the process holds, not their bytes: 1000 held requests
of 16 MiB each would be 16 GiB. Every delivered body is counted here from its delivery until
it is acked or handed back. A body that does not fit is handed back to RabbitMQ unparsed (it
stays queued, never lost) and the consumers pause; they resume, with a prefetch the budget can
hold, once half the budget is free, and with the full prefetch again once as many small bodies
(ones the full prefetch would hold) went by in a row.

Pure bookkeeping: :meth:`HeldBytes.take` and :meth:`HeldBytes.give_back` say what the link
should do (:class:`Flow`); the server does it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Flow:
    """What the consumers should be doing: paused, or consuming with ``prefetch``."""

    paused: bool
    prefetch: int


class HeldBytes:
    """Bytes of the bodies held now, against ``limit``; one body alone is always taken."""

    def __init__(self, limit: int, prefetch: int, biggest: int) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0
        self.refused = 0
        self._full = prefetch
        # What the budget surely holds: that many of the largest messages allowed.
        self._cautious = max(1, min(prefetch, limit // max(1, biggest)))
        self._small_run = 0  # bodies in a row that the full prefetch would hold
        self.flow = Flow(paused=False, prefetch=prefetch)

    def take(self, size: int) -> bool:
        """Count a delivered body; False (and pause) when it does not fit: hand it back."""
        if self.held and self.held + size > self.limit:
            self.refused += 1
            self._small_run = 0
            self.flow = Flow(paused=True, prefetch=self._cautious)
            return False
        self._small_run = self._small_run + 1 if size * self._full <= self.limit else 0
        self.held += size
        self.peak = max(self.peak, self.held)
        return True

    def give_back(self, size: int) -> None:
        """A taken body was acked or handed back: resume once there is room; the full
        prefetch again once a cautious window of small bodies went by."""
        self.held -= size
        if self.flow.paused and self.held <= self.limit // 2:
            self.flow = Flow(paused=False, prefetch=self._cautious)
        elif not self.flow.paused and self._small_run >= self._cautious:
            self.flow = Flow(paused=False, prefetch=self._full)
