"""Placement's allocation rows as the mirror knows them, and what moved between two reads.

Allocation rows are inserted and deleted, never updated, so the set of their ids says
everything (``sql.py``). Each refresh gets that set from PostgreSQL as bitmaps (64 ids to a
word); :func:`bitmap_diff` gives the ids gone and the ids appeared, exactly. The rows of the
ids gone are looked up in :class:`KnownRows` (the mirror read them when they appeared), the
appeared ones are read by id, and only the sums of the (provider, class) pairs they touch
move. Values here are not changed after they are made: a refresh builds new ones (sharing
what did not move), so a refresh that fails half way leaves the previous ones as they were.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from asyncsched.state.placement_mirror.binary import ArrayFormatError, Int64s, arrays, ascending

BoolArray = npt.NDArray[np.bool_]
_BITS = np.arange(64, dtype=np.uint64)


@dataclass(frozen=True, slots=True, eq=False)
class Bitmaps:
    """The allocation ids present: ascending buckets ``id >> 6`` and, per bucket, a 64-bit
    word with bit ``id & 63`` set for each id present."""

    buckets: Int64s
    words: Int64s

    @classmethod
    def decode(cls, buckets: bytes, words: bytes) -> Bitmaps:
        return cls.checked(*arrays((buckets, words), (4, 8)))

    @classmethod
    def checked(cls, b: Int64s, w: Int64s) -> Bitmaps:
        """From the two arrays of one answer, whichever form it came in."""
        if len(b) != len(w):
            raise ArrayFormatError("arrays of different lengths")
        if not ascending(b):
            raise ArrayFormatError("allocation buckets not ascending")
        return cls(b, w)

    @classmethod
    def of_ids(cls, ids: Int64s) -> Bitmaps:
        """The bitmaps of ascending ids."""
        if not len(ids):
            return cls(np.empty(0, np.int64), np.empty(0, np.int64))
        b = ids >> 6
        starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
        bits = np.left_shift(np.uint64(1), (ids & 63).astype(np.uint64))
        return cls(b[starts], np.bitwise_or.reduceat(bits, starts).view(np.int64))

    def same(self, other: Bitmaps) -> bool:
        return np.array_equal(self.buckets, other.buckets) and np.array_equal(
            self.words, other.words
        )


def _ids(buckets: Int64s, words: Int64s) -> Int64s:
    """The ids of the bits set, ascending."""
    nz = np.flatnonzero(words)
    if not len(nz):
        return np.empty(0, np.int64)
    w = words[nz].view(np.uint64)
    bits = ((w[:, None] >> _BITS) & np.uint64(1)).astype(bool)
    rows, cols = np.nonzero(bits)
    return (buckets[nz][rows] << 6) + cols.astype(np.int64)


def bitmap_diff(old: Bitmaps, new: Bitmaps) -> tuple[Int64s, Int64s]:
    """(ids gone, ids appeared) from ``old`` to ``new``, each ascending."""
    if np.array_equal(old.buckets, new.buckets):
        x = old.words ^ new.words
        return _ids(old.buckets, x & old.words), _ids(new.buckets, x & new.words)
    _, io, inew = np.intersect1d(old.buckets, new.buckets, assume_unique=True, return_indices=True)
    gone, came = old.words.copy(), new.words.copy()
    gone[io] &= ~new.words[inew]
    came[inew] &= ~old.words[io]
    return _ids(old.buckets, gone), _ids(new.buckets, came)


@dataclass(frozen=True, slots=True, eq=False)
class Rows:
    """Allocation rows, ascending id: id, provider id, class id, used."""

    ids: Int64s
    rp: Int64s
    rc: Int64s
    used: Int64s

    @classmethod
    def decode(cls, ids: bytes, rp: bytes, rc: bytes, used: bytes) -> Rows:
        return cls.checked(*arrays((ids, rp, rc, used), (4, 4, 4, 4)))

    @classmethod
    def checked(cls, *a: Int64s) -> Rows:
        """From the four arrays of one answer, whichever form it came in."""
        if len({len(x) for x in a}) > 1:
            raise ArrayFormatError("arrays of different lengths")
        if not ascending(a[0]):
            raise ArrayFormatError("allocation ids not ascending")
        return cls(*a)

    @classmethod
    def empty(cls) -> Rows:
        e = np.empty(0, np.int64)
        return cls(e, e, e, e)

    def __len__(self) -> int:
        return len(self.ids)

    def at(self, index: npt.NDArray[np.intp]) -> Rows:
        return Rows(self.ids[index], self.rp[index], self.rc[index], self.used[index])

    @staticmethod
    def joined(parts: list[Rows]) -> Rows:
        """The rows of ``parts`` (disjoint ids), ascending."""
        ids = np.concatenate([p.ids for p in parts])
        order = np.argsort(ids, kind="stable")
        return Rows(
            ids[order],
            np.concatenate([p.rp for p in parts])[order],
            np.concatenate([p.rc for p in parts])[order],
            np.concatenate([p.used for p in parts])[order],
        )

    def find(self, ids: Int64s) -> npt.NDArray[np.intp]:
        """Positions of ``ids`` here, -1 where absent."""
        pos = np.searchsorted(self.ids, ids)
        ok = pos < len(self.ids)
        ok[ok] = self.ids[pos[ok]] == ids[ok]
        return np.where(ok, pos, -1)


@dataclass(frozen=True, slots=True, eq=False)
class KnownRows:
    """Every allocation row the mirror's state counts: a large ``base`` with the rows gone
    since masked out, plus the small ``extra`` that appeared since; folded back into one
    base when the changes grow past an eighth of it (so the work per refresh stays in
    proportion to the changes, a fold now and then included)."""

    base: Rows
    gone: BoolArray
    gone_count: int
    extra: Rows

    @classmethod
    def of(cls, rows: Rows) -> KnownRows:
        return cls(rows, np.zeros(len(rows), dtype=bool), 0, Rows.empty())

    def __len__(self) -> int:
        return len(self.base) - self.gone_count + len(self.extra)

    def moved(self, gone: Int64s, came: Rows) -> tuple[KnownRows, Rows]:
        """(the rows known after ``gone`` ids left and ``came`` rows arrived, the rows
        that left). Every id gone must be known: otherwise ArrayFormatError."""
        pos = self.base.find(gone)
        found = pos >= 0
        found[found] = ~self.gone[pos[found]]
        hit_base = pos[found]
        hit_extra = self.extra.find(gone[~found])
        if bool(np.any(hit_extra < 0)):
            raise ArrayFormatError("an allocation left that the mirror never saw")
        left = Rows.joined([self.base.at(hit_base), self.extra.at(hit_extra)])
        mask = self.gone
        if len(hit_base):
            mask = mask.copy()
            mask[hit_base] = True
        keep = np.ones(len(self.extra), dtype=bool)
        keep[hit_extra] = False
        extra = Rows.joined([self.extra.at(np.flatnonzero(keep)), came])
        gone_count = self.gone_count + len(hit_base)
        if gone_count + len(extra) > max(4096, len(self.base) // 8):
            base = Rows.joined([self.base.at(np.flatnonzero(~mask)), extra])
            return KnownRows.of(base), left
        return KnownRows(self.base, mask, gone_count, extra), left

    def all(self) -> Rows:
        return Rows.joined([self.base.at(np.flatnonzero(~self.gone)), self.extra])


def sums(rows: Rows, sign: int = 1) -> dict[tuple[int, int], int]:
    """``used`` summed per (provider, class) of ``rows``, times ``sign``."""
    if not len(rows):
        return {}
    keys = (rows.rp << 32) | (rows.rc & 0xFFFFFFFF)
    uniq, inv = np.unique(keys, return_inverse=True)
    total = np.zeros(len(uniq), dtype=np.int64)
    np.add.at(total, inv, rows.used)
    rp = (uniq >> 32).tolist()
    rc = (uniq & 0xFFFFFFFF).astype(np.uint32).view(np.int32).tolist()
    return {(p, c): sign * n for p, c, n in zip(rp, rc, total.tolist(), strict=True)}
