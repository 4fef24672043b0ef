"""Reconnect delays: short first, doubling to a cap, with jitter. One rule for every peer.

A peer that comes back should be used again within a fraction of a second: every request
published to RabbitMQ before our queue is re-declared is dropped unrouted, and a cell database
that answers again should be read at once. The cap keeps a peer that stays away from being
hammered, and the jitter keeps many schedulers from reconnecting in lockstep.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Backoff:
    """``initial`` s, doubling per failed attempt, at most ``cap`` s, minus up to ``jitter``."""

    initial: float
    cap: float
    jitter: float = 0.2

    def base(self, attempt: int) -> float:
        """The delay before jitter: ``initial * 2**attempt``, at most ``cap``."""
        return min(self.cap, self.initial * 2.0 ** min(attempt, 62))

    def delay(self, attempt: int, rng: random.Random) -> float:
        """The wait before attempt ``attempt + 1`` (``attempt`` = failures so far, from 0)."""
        return self.base(attempt) * (1.0 - self.jitter * rng.random())
