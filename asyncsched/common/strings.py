"""String rules shared by the flavor/image property readers (oslo strutils semantics)."""

from __future__ import annotations

#: oslo_utils.strutils.TRUE_STRINGS: what ``bool_from_string`` reads as true.
TRUE_STRINGS = frozenset({"1", "t", "true", "on", "y", "yes"})


def bool_from_string(value: object) -> bool:
    """oslo strutils.bool_from_string, non-strict: a bool as is, else one of TRUE_STRINGS."""
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in TRUE_STRINGS
