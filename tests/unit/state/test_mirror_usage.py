"""Which providers' usage a refresh must take again: the numpy comparison of two usage
snapshots (the query's three arrays in PostgreSQL's binary form) is the dict one, whatever
moved, appeared or went."""

from __future__ import annotations

import random

import numpy as np
import pytest

from asyncsched.state.placement_mirror.reader import (
    Names,
    UsageArrays,
    UsageFormatError,
    _usage_touched,
    _used_of,
)

Sums = dict[tuple[int, int], int]


def array_send(values: list[int], size: int, nulls: bool = False) -> bytes:
    """PostgreSQL's ``array_send`` of a one-dimensional int4 (size 4) or int8 (size 8) array."""
    oid = (23 if size == 4 else 20).to_bytes(4, "big")
    if not values:
        return bytes(8) + oid
    head = (1).to_bytes(4, "big") + int(nulls).to_bytes(4, "big") + oid
    head += len(values).to_bytes(4, "big") + (1).to_bytes(4, "big")
    rec = np.array([(size, v) for v in values], dtype=[("len", ">i4"), ("v", f">i{size}")])
    return head + rec.tobytes()


def encode(sums: Sums) -> UsageArrays:
    keys = sorted(sums)
    return UsageArrays.decode(
        array_send([rp for rp, _ in keys], 4),
        array_send([rc for _, rc in keys], 4),
        array_send([sums[k] for k in keys], 8),
    )


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


def test_decode_reads_the_binary_arrays_and_refuses_other_shapes() -> None:
    usage = encode({(7, 1): 3, (70000, 2): 2**40})
    assert usage.rp.tolist() == [7, 70000]
    assert usage.rc.tolist() == [1, 2]
    assert usage.n.tolist() == [3, 2**40]
    with pytest.raises(UsageFormatError):  # a NULL element
        UsageArrays.decode(array_send([1], 4, nulls=True), array_send([1], 4), array_send([1], 8))
    with pytest.raises(UsageFormatError):  # arrays of different lengths
        UsageArrays.decode(array_send([1, 2], 4), array_send([1], 4), array_send([1], 8))
    with pytest.raises(UsageFormatError):
        UsageArrays.decode(b"", b"", b"")
