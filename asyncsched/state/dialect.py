"""What differs between PostgreSQL and MySQL/MariaDB in the SQL we send: one place per dialect.

The queries themselves are written once (``state/sql.py``) with ``$n`` parameters, ``"quoted"``
identifiers (MySQL sessions run with ``ANSI_QUOTES``) and the few fragments below. Whatever a
query does with them, a dialect only says how to write: the DB's clock in UTC, membership in a
parameter list, the folding of key/value rows into one string, and the casts.

* **Clock**: PostgreSQL's ``now()`` in UTC; MySQL's ``UTC_TIMESTAMP()``, in whole seconds like
  nova's ``DATETIME`` columns, so a watermark ``>=`` a read's instant includes every row
  stamped within that same second (a fractional instant would skip rows written later in it).
* **UTC values**: PostgreSQL can hand a naive UTC column out as ``timestamptz`` (decoded
  aware by the driver, no per-row ``replace(tzinfo=...)`` in Python); MySQL gives it as it is
  (naive, made aware by the reader).
* **Lists**: PostgreSQL binds one array (``= ANY($1::int[])``); on MySQL the driver expands a
  tuple into ``(a, b, ...)``, an empty one into ``(NULL)``, which matches nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

US, RS = "\x1f", "\x1e"  # unit and record separators of the folded image properties


@dataclass(frozen=True, slots=True)
class Syntax:
    """The fragments of SQL that differ between the two dialects."""

    name: str
    now: str  # the DB's clock, naive UTC
    text: str  # the type a CAST to text names
    bigint: str  # the type a CAST to a 64-bit integer names
    # (column, parameter, element type) -> a WHERE condition: column in the list parameter
    where_in: Callable[[str, int, str], str]
    # the same as a boolean value (false, never NULL, for an empty list)
    member: Callable[[str, int, str], str]
    # key column, value column -> key US value RS ... in key order, one per group
    fold_kv: Callable[[str, str], str]
    # a naive UTC column -> the same instant, aware where the dialect can (PostgreSQL)
    utc: Callable[[str], str]


def _pg_in(col: str, param: int, typ: str) -> str:
    return f"{col} = ANY(${param}::{typ}[])"


def _pg_member(col: str, param: int, typ: str) -> str:
    return f"({_pg_in(col, param, typ)})"


def _pg_fold(key: str, value: str) -> str:
    return f"string_agg({key} || chr(31) || {value}, chr(30) ORDER BY {key})"


def _pg_utc(col: str) -> str:
    return f"({col} AT TIME ZONE 'UTC')"


def _my_utc(col: str) -> str:
    return col


def _my_in(col: str, param: int, typ: str) -> str:
    return f"{col} IN ${param}"


def _my_member(col: str, param: int, typ: str) -> str:
    return f"coalesce({col} IN ${param}, false)"


def _my_fold(key: str, value: str) -> str:
    # GROUP_CONCAT is cut at group_concat_max_len: the session raises it (db_mysql.py).
    return f"GROUP_CONCAT(CONCAT({key}, '{US}', {value}) ORDER BY {key} SEPARATOR '{RS}')"


POSTGRES = Syntax(
    name="postgresql",
    now="(now() AT TIME ZONE 'utc')",
    text="text",
    bigint="bigint",
    where_in=_pg_in,
    member=_pg_member,
    fold_kv=_pg_fold,
    utc=_pg_utc,
)
MYSQL = Syntax(
    name="mysql",
    now="UTC_TIMESTAMP()",
    text="char",
    bigint="signed",
    where_in=_my_in,
    member=_my_member,
    fold_kv=_my_fold,
    utc=_my_utc,
)
