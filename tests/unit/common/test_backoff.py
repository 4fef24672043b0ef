"""common.backoff: short first delays, doubling to the cap, jitter only ever shortening."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from asyncsched.common.backoff import Backoff


def test_doubles_from_the_first_delay_to_the_cap() -> None:
    plain = Backoff(0.1, 0.5, jitter=0.0)
    rng = random.Random(1)
    assert [plain.delay(n, rng) for n in range(6)] == [0.1, 0.2, 0.4, 0.5, 0.5, 0.5]


@given(
    st.floats(0.001, 10),
    st.floats(0.001, 100),
    st.floats(0, 1),
    st.integers(0, 10_000),
    st.integers(0, 2**32),
)
def test_jitter_stays_within_its_fraction_below_the_base(
    initial: float, cap: float, jitter: float, attempt: int, seed: int
) -> None:
    backoff = Backoff(initial, cap, jitter)
    base = min(cap, initial * 2.0 ** min(attempt, 62))
    delay = backoff.delay(attempt, random.Random(seed))
    assert base * (1 - jitter) <= delay <= base
