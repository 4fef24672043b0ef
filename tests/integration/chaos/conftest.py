"""Fault tests: sizes, and the figures they print.

The CI size keeps the whole folder to a few minutes on a loaded 2-core machine; ``make chaos``
sets ``ASYNCSCHED_CHAOS_BIG=1`` for the sizes of issue #13 (200 calls in flight, bigger
clouds). Every test prints its figures on lines starting ``FIGURE`` (``pytest -s`` shows them).
"""

from __future__ import annotations

import os

BIG = os.environ.get("ASYNCSCHED_CHAOS_BIG", "") not in ("", "0")


def size(ci: int, big: int) -> int:
    return big if BIG else ci


def figure(name: str, text: str) -> None:
    print(f"FIGURE {name}{' (big)' if BIG else ''}: {text}", flush=True)
