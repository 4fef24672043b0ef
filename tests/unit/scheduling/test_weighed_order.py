"""WeighedOrder: the lazily sorted pick order equals the full stable argsort it replaces."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncsched.scheduling.engine import WeighedOrder


def reference(cur: list[int], weights: list[float], chosen: int) -> list[int]:
    order = np.argsort(-np.array(weights), kind="stable").tolist()
    return [cur[chosen]] + [cur[p] for p in order if p != chosen]


FINITE = [0.0, 0.25, 0.5, 1.0, -1.0, 3.0]
NON_FINITE = [float("inf"), -float("inf"), float("nan")]


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.lists(st.sampled_from(FINITE), min_size=1, max_size=400),
        st.lists(st.sampled_from(FINITE * 20 + NON_FINITE), min_size=1, max_size=400),
    ),
    st.data(),
)
def test_every_order_and_prefix_equals_the_stable_argsort(
    weights: list[float], data: st.DataObject
) -> None:
    n = len(weights)
    chosen = data.draw(st.integers(0, n - 1))
    cur = data.draw(st.permutations(range(1000, 1000 + n)))
    got = WeighedOrder(np.array(cur, dtype=np.intp), np.array(weights), chosen)
    want = reference(list(cur), weights, chosen)
    take = data.draw(st.integers(0, n))
    it = iter(got)
    assert [next(it) for _ in range(take)] == want[:take]  # a prefix alone
    assert list(got) == want  # and iterated again, all of it
    assert list(got) == want


def test_the_order_is_the_picks_even_if_the_arrays_change_after() -> None:
    cur = np.arange(300, dtype=np.intp)
    weights = np.linspace(0.0, 1.0, 300)
    got = WeighedOrder(cur, weights, 5)
    want = reference(cur.tolist(), weights.tolist(), 5)
    cur[:] = 0
    weights[:] = 0.0
    assert list(got) == want


def test_ten_thousand_hosts_with_ties_across_the_head() -> None:
    rng = np.random.default_rng(4)
    weights = rng.integers(0, 2000, size=10_000) / 10.0  # ~5 hosts per weight
    cur = rng.permutation(10_000).astype(np.intp)
    got = WeighedOrder(cur, weights, 17)
    want = reference(cur.tolist(), weights.tolist(), 17)
    it = iter(got)
    assert [next(it) for _ in range(200)] == want[:200]
    assert list(got) == want
