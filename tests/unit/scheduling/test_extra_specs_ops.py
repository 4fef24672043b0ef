"""extra_specs_ops.match against nova's operator table."""

from __future__ import annotations

import pytest

from asyncsched.scheduling.extra_specs_ops import match
from tests.support.growth import per_call

CASES = [
    ("1", "1", True),
    ("1", "2", False),
    ("123", "= 123", True),
    ("124", "= 123", True),  # '=' means >=
    ("122", "= 123", False),
    ("12", "== 12", True),
    ("12.0", "== 12", True),
    ("13", "== 12", False),
    ("12", "!= 12", False),
    ("13", "!= 12", True),
    ("4", ">= 4", True),
    ("3", ">= 4", False),
    ("4", "<= 4", True),
    ("5", "<= 4", False),
    ("abc", "s== abc", True),
    ("abd", "s!= abc", True),
    ("abc", "s!= abc", False),
    ("abc", "s< abd", True),
    ("abc", "s<= abc", True),
    ("abd", "s> abc", True),
    ("abc", "s>= abd", False),
    ("12311321", "<in> 11", True),
    ("12311321", "<in> 55", False),
    ("12311321", "<all-in> 11 32", True),
    ("12311321", "<all-in> 11 55", False),
    ("12", "<or> 11 <or> 12", True),
    ("13", "<or> 11 <or> 12", False),
    ("12", "<or> 11 <or>", False),
    ("abc", ">= abc", False),  # not a number: no match instead of a crash
    ("1", "<in>", False),  # operator without an operand
    ("", "", True),
]


@pytest.mark.parametrize(("value", "req", "expected"), CASES)
def test_match(value: str, req: str, expected: bool) -> None:
    assert match(value, req) is expected


def test_none_value_only_matches_through_plain_equality() -> None:
    assert match(None, ">= 1") is False
    assert match(None, "<or> a <or> b") is False


def _or_spec(words: int) -> str:
    return " ".join(["<or>", "a"] * words) + " <or> b"


def test_or_is_linear_in_the_extra_spec() -> None:
    """A flavor's extra spec is untrusted text: ``<or>`` over 8N words costs about 8 times N.

    The old walk popped the words from the front of a list (quadratic: about 64 times); both
    sizes are measured here, no fixed time bound.
    """
    n = 2_000
    small, big = _or_spec(n), _or_spec(8 * n)
    assert match("b", small) and match("b", big)
    t_small = per_call(lambda: match("b", small))
    t_big = per_call(lambda: match("b", big))
    assert t_big / t_small < 24, f"N {t_small * 1e6:.1f} us, 8N {t_big * 1e6:.1f} us"
