"""PostgreSQL's binary array form (``array_send``), read whole by numpy."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from asyncsched.exceptions import AsyncschedError

Int64s = npt.NDArray[np.int64]


class ArrayFormatError(AsyncschedError):
    """A binary array is not the one-dimensional int array without NULLs asked for, or the
    arrays of one answer do not agree."""


def array_values(raw: bytes, size: int) -> Int64s:
    """The values of a one-dimensional int4 (size 4) or int8 (size 8) array in
    ``array_send``'s form: a header, then (length, value) per element."""
    if len(raw) < 12:
        raise ArrayFormatError("short array")
    ndim = int.from_bytes(raw[0:4], "big", signed=True)
    if ndim == 0:
        return np.empty(0, dtype=np.int64)
    if ndim != 1 or raw[4:8] != bytes(4) or len(raw) < 20:
        raise ArrayFormatError("not a one-dimensional array without NULLs")
    if (len(raw) - 20) % (4 + size):
        raise ArrayFormatError("unexpected element lengths")
    rec = np.frombuffer(raw, dtype=np.dtype([("len", ">i4"), ("v", f">i{size}")]), offset=20)
    if len(rec) != int.from_bytes(raw[12:16], "big") or not bool(np.all(rec["len"] == size)):
        raise ArrayFormatError("unexpected element lengths")
    return rec["v"].astype(np.int64)


def arrays(raws: tuple[bytes, ...], sizes: tuple[int, ...]) -> list[Int64s]:
    """Several arrays of one answer, which must have one length."""
    out = [array_values(r, s) for r, s in zip(raws, sizes, strict=True)]
    if len({len(a) for a in out}) > 1:
        raise ArrayFormatError("arrays of different lengths")
    return out


def ascending(values: Int64s) -> bool:
    """Strictly ascending (the queries' order, and unique keys)."""
    return len(values) < 2 or bool(np.all(values[1:] > values[:-1]))
