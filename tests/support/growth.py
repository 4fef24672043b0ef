"""Timing helpers for growth tests: N against 8N in the same test, never a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def per_call(fn: Callable[[], object]) -> float:
    """CPU seconds per call: the best of 5 rounds of enough calls to last 20 ms.

    CPU time of this process, not wall time: on the shared machine (load 20 and more on 2
    cores) a wall-clock round mostly measured the wait for a core, and a 8N/N ratio of a
    linear scan came out at 36."""
    reps = 1
    while True:
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        took = time.process_time() - t0
        if took >= 0.02:
            break
        reps *= 4
    best = took
    for _ in range(4):
        t0 = time.process_time()
        for _ in range(reps):
            fn()
        best = min(best, time.process_time() - t0)
    return best / reps
