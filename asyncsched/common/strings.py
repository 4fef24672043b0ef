"""String rules shared by the flavor/image property readers (oslo strutils semantics), and
the "did you mean" of the configuration's messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: oslo_utils.strutils.TRUE_STRINGS: what ``bool_from_string`` reads as true.
TRUE_STRINGS = frozenset({"1", "t", "true", "on", "y", "yes"})


def bool_from_string(value: object) -> bool:
    """oslo strutils.bool_from_string, non-strict: a bool as is, else one of TRUE_STRINGS."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in TRUE_STRINGS


def closest(word: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.0) -> list[str]:
    """The ``n`` names of ``choices`` most like ``word`` (difflib's ratio), best first."""
    return difflib.get_close_matches(word, sorted(set(choices)), n=n, cutoff=cutoff)
