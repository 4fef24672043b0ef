"""Which providers' usage a refresh must take again: the numpy comparison of two usage
snapshots (the query's 16-byte records) is the dict one, whatever moved, appeared or went."""

from __future__ import annotations

import random

import numpy as np
import pytest

from asyncsched.state.placement_mirror.reader import (
    _USAGE_RECORD,
    Names,
    UsageArrays,
    _usage_touched,
    _used_of,
)

Sums = dict[tuple[int, int], int]


def encode(sums: Sums) -> UsageArrays:
    rows = sorted(sums.items())
    rec = np.array([(rp, rc, n) for (rp, rc), n in rows], dtype=_USAGE_RECORD)
    return UsageArrays.decode(rec.tobytes())


def _sums(rng: random.Random) -> Sums:
    return {
        (rp, rc): rng.randint(0, 5)
        for rp in rng.sample(range(1, 80), 30)
        for rc in rng.sample(range(4), rng.randint(1, 3))
    }


@pytest.mark.parametrize("seed", range(60))
def test_touched_providers_are_those_whose_sums_differ(seed: int) -> None:
    rng = random.Random(seed)
    before = _sums(rng)
    after = dict(before)
    for key in rng.sample(sorted(after), rng.randint(0, 5)):  # a claim or a delete moved it
        after[key] += rng.choice([-1, 1, 2])
    if rng.random() < 0.5:  # pairs gone (all allocations deleted) and new pairs
        for key in rng.sample(sorted(after), 3):
            del after[key]
        after[(90 + seed % 7, seed % 4)] = 1
    want = {rp for rp, _ in set(before) | set(after) if before.get((rp, _)) != after.get((rp, _))}
    assert _usage_touched(encode(before), encode(after)) == want
    assert _usage_touched(encode(after), encode(after)) == set()
    assert _usage_touched(None, encode(after)) == {rp for rp, _ in after}


def test_used_of_reads_only_the_providers_asked_and_drops_zero_sums() -> None:
    names = Names(classes={0: "VCPU", 1: "MEMORY_MB"}, traits={})
    usage = encode({(1, 0): 2, (1, 1): 0, (2, 1): 512, (3, 0): 1})
    assert _used_of(usage, names, None) == {1: {"VCPU": 2}, 2: {"MEMORY_MB": 512}, 3: {"VCPU": 1}}
    assert _used_of(usage, names, {2, 9}) == {2: {"MEMORY_MB": 512}}
    assert _used_of(encode({}), names, None) == {}
    assert encode({}).classes() == [] and usage.classes() == [0, 1]


def test_records_in_any_order_decode_as_the_ordered_ones() -> None:
    """The query leaves the order to PostgreSQL: out-of-order records are sorted, and equal
    sums in another order are equal bytes."""
    sums = {(rp, rc): rp * 10 + rc for rp in (5, 1, 3) for rc in (2, 0)}
    rows = list(sums.items())
    random.Random(3).shuffle(rows)
    rec = np.array([(rp, rc, n) for (rp, rc), n in rows], dtype=_USAGE_RECORD)
    shuffled, ordered = UsageArrays.decode(rec.tobytes()), encode(sums)
    assert shuffled.raw == ordered.raw
    assert shuffled.keys.tolist() == ordered.keys.tolist()
    assert _usage_touched(shuffled, ordered) == set()
