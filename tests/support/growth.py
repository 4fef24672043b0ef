"""Timing helpers for growth tests: N against 8N in the same test, never a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def per_call(fn: Callable[[], object]) -> float:
    """Seconds per call: the best of 5 rounds of enough calls to last 20 ms."""
    reps = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        took = time.perf_counter() - t0
        if took >= 0.02:
            break
        reps *= 4
    best = took
    for _ in range(4):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / reps
