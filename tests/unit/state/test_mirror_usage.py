"""The mirror's allocations: the id bitmaps PostgreSQL sends are the id set, their numpy
difference is the set difference, and the rows known after any run of deletes, inserts and
late commits sum to what a full read sums to."""

from __future__ import annotations

import random

import numpy as np
import pytest

from asyncsched.state.placement_mirror.allocations import (
    Bitmaps,
    KnownRows,
    Rows,
    bitmap_diff,
    sums,
)
from asyncsched.state.placement_mirror.binary import ArrayFormatError
from asyncsched.state.placement_mirror.reader import ProviderArrays


def array_send(values: list[int], size: int, nulls: bool = False) -> bytes:
    """PostgreSQL's ``array_send`` of a one-dimensional int4 (size 4) or int8 (size 8) array."""
    oid = (23 if size == 4 else 20).to_bytes(4, "big")
    if not values:
        return bytes(8) + oid
    head = (1).to_bytes(4, "big") + int(nulls).to_bytes(4, "big") + oid
    head += len(values).to_bytes(4, "big") + (1).to_bytes(4, "big")
    rec = np.array([(size, v) for v in values], dtype=[("len", ">i4"), ("v", f">i{size}")])
    return head + rec.tobytes()


def pg_bitmaps(ids: set[int]) -> Bitmaps:
    """What ``sql.ALLOCATION_BITMAPS`` sends for these ids (its rule, written out)."""
    words: dict[int, int] = {}
    for i in ids:
        words[i >> 6] = words.get(i >> 6, 0) | (1 << (i & 63))
    keys = sorted(words)
    signed = [w - (1 << 64) if w >= 1 << 63 else w for w in (words[k] for k in keys)]
    return Bitmaps.decode(array_send(keys, 4), array_send(signed, 8))


def as_rows(table: dict[int, tuple[int, int, int]]) -> Rows:
    ids = sorted(table)
    return Rows.decode(
        array_send(ids, 4),
        array_send([table[i][0] for i in ids], 4),
        array_send([table[i][1] for i in ids], 4),
        array_send([table[i][2] for i in ids], 4),
    )


def ref_sums(table: dict[int, tuple[int, int, int]]) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for rp, rc, n in table.values():
        out[(rp, rc)] = out.get((rp, rc), 0) + n
    return out


@pytest.mark.parametrize("seed", range(60))
def test_bitmap_difference_is_the_set_difference(seed: int) -> None:
    rng = random.Random(seed)
    universe = range(1, rng.choice([200, 5000]))
    before = set(rng.sample(universe, rng.randint(0, 150)))
    after = set(before)
    for i in rng.sample(sorted(after), min(len(after), rng.randint(0, 20))):
        after.discard(i)
    after |= set(rng.sample(universe, rng.randint(0, 20)))
    after |= {63, 64, 127} if seed % 3 == 0 else set()  # the sign bit, a bucket's edges
    gone, came = bitmap_diff(pg_bitmaps(before), pg_bitmaps(after))
    assert gone.tolist() == sorted(before - after)
    assert came.tolist() == sorted(after - before)
    assert pg_bitmaps(after).same(Bitmaps.of_ids(np.array(sorted(after), dtype=np.int64)))


def test_known_rows_follow_deletes_inserts_and_late_commits() -> None:
    """Rows deleted anywhere, new ids above the highest, late commits below it, rows
    inserted and deleted again unseen: after each step the known rows are the table, and
    the sums moved by the rows that left and came are the change of the full sums."""
    rng = random.Random(7)
    table = {i: (rng.randint(1, 40), rng.randint(0, 2), rng.randint(1, 9)) for i in range(1, 3000)}
    held_back = set(range(2990, 3000))  # ids taken by transactions that commit late
    for i in held_back:
        del table[i]
    known = KnownRows.of(as_rows(table))
    bitmaps = pg_bitmaps(set(table))
    next_id, folds = 3000, 0
    for step in range(200):
        before = ref_sums(table)
        for i in rng.sample(sorted(table), rng.randint(0, 40)):
            del table[i]
        for _ in range(rng.randint(0, 40)):
            table[next_id] = (rng.randint(1, 40), rng.randint(0, 2), rng.randint(1, 9))
            next_id += 1
        next_id += rng.randint(0, 3)  # rolled back: ids never seen
        if step % 15 == 5 and held_back:  # a late commit below ids already seen
            table[held_back.pop()] = (1, 0, 1)
        now = pg_bitmaps(set(table))
        gone, came_ids = bitmap_diff(bitmaps, now)
        came = as_rows({i: table[i] for i in came_ids.tolist()})
        known2, left = known.moved(gone, came)
        folds += known2.base is not known.base
        known, bitmaps = known2, now
        assert len(known) == len(table)
        assert known.all().ids.tolist() == sorted(table)
        delta = sums(came)
        for k, n in sums(left, -1).items():
            delta[k] = delta.get(k, 0) + n
        after = ref_sums(table)
        for k in set(before) | set(after):
            assert after.get(k, 0) - before.get(k, 0) == delta.get(k, 0), k
    assert sums(known.all()) == ref_sums(table)
    assert folds >= 1  # the changes were folded into the base at least once


def test_an_id_gone_that_was_never_seen_is_refused() -> None:
    known = KnownRows.of(as_rows({1: (1, 0, 1), 2: (1, 0, 1)}))
    with pytest.raises(ArrayFormatError):
        known.moved(np.array([3], dtype=np.int64), Rows.empty())
    after, left = known.moved(np.array([2], dtype=np.int64), Rows.empty())
    with pytest.raises(ArrayFormatError):  # gone already
        after.moved(np.array([2], dtype=np.int64), Rows.empty())
    assert left.ids.tolist() == [2]


def test_decoders_read_the_binary_arrays_and_refuse_other_shapes() -> None:
    rows = as_rows({7: (70000, 1, 3), 9: (2, 2, 2**31 - 1)})
    assert rows.rp.tolist() == [70000, 2] and rows.used.tolist() == [3, 2**31 - 1]
    assert sums(rows) == {(70000, 1): 3, (2, 2): 2**31 - 1}
    e4 = array_send([], 4)
    assert len(Rows.decode(e4, e4, e4, e4)) == 0
    with pytest.raises(ArrayFormatError):  # a NULL element
        Rows.decode(array_send([1], 4, nulls=True), *[array_send([1], 4)] * 3)
    with pytest.raises(ArrayFormatError):  # arrays of different lengths
        Rows.decode(array_send([1, 2], 4), *[array_send([1], 4)] * 3)
    with pytest.raises(ArrayFormatError):  # not ascending
        Rows.decode(array_send([2, 1], 4), *[array_send([1, 1], 4)] * 3)
    with pytest.raises(ArrayFormatError):  # an int8 where int4 was asked
        Bitmaps.decode(array_send([1], 8), array_send([1], 8))
    with pytest.raises(ArrayFormatError):
        Bitmaps.decode(b"", b"")
    with pytest.raises(ArrayFormatError):  # truncated
        ProviderArrays.decode(array_send([1, 2], 4)[:-3], *[array_send([1, 2], 8)] * 2)
    with pytest.raises(ArrayFormatError):  # the five int4 arrays of before: not this contract
        ProviderArrays.decode(*[array_send([1, 2], 4)] * 5)
    assert ProviderArrays.decode(*[array_send([1, 2], s) for s in (4, 8, 8)]).tree.tolist() == [
        1,
        2,
    ]
