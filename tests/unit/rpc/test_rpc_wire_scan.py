"""``wire.scan_address`` (issue #21, item 1): linear in the body, same answers as before.

The old pattern began with an unbounded ``\\\\*`` run, so a body of backslashes was scanned
again from every one of them: quadratic (40,000 backslashes held the loop 4.6 s). The timing
test compares a body of size N with one of 8N, both measured here: a linear scan takes about
8 times as long, a quadratic one 64 times. No fixed time bound.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from asyncsched.rpc import wire
from asyncsched.rpc.wire import ReplyAddress
from tests.support.growth import per_call

# The pattern scan_address used before issue #21: the reference for what it should find.
_OLD_RE = {
    key: re.compile(rb'\\*"' + key.encode() + rb'\\*"\s*:\s*\\*"([A-Za-z0-9_.:@\-]{1,255})\\*"')
    for key in ("_msg_id", "_reply_q")
}


def _old_scan(body: bytes) -> ReplyAddress | None:
    found = {}
    for key, pattern in _OLD_RE.items():
        m = pattern.search(body)
        if m is None:
            return None
        found[key] = m.group(1).decode()
    return ReplyAddress(reply_q=found["_reply_q"], msg_id=found["_msg_id"])


def _envelope_of(text: str) -> bytes:
    return json.dumps({"oslo.version": "2.0", "oslo.message": text}).encode()


HOSTILE: dict[str, Callable[[int], bytes]] = {
    "backslashes": lambda n: b"\\" * n,
    "backslashes in an envelope": lambda n: _envelope_of("\\" * n),
    "quotes": lambda n: b'"' * n,
    "escaped quotes": lambda n: b'\\"' * (n // 2),
    "key repeated": lambda n: b'"_msg_id' * (n // 8),
    "key then backslashes": lambda n: b'\\"_msg_id' + b"\\" * n,
    "key then blanks": lambda n: b'"_msg_id"' + b" " * n + b":",
    "key and value repeated": lambda n: b'\\"_msg_id\\": \\"' * (n // 16),
    "value runs": lambda n: b'"_msg_id": "' + b"a" * n,
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_scan_address_is_linear(case: str) -> None:
    make = HOSTILE[case]
    n = 20_000
    small, big = make(n), make(8 * n)
    t_small = per_call(lambda: wire.scan_address(small))
    t_big = per_call(lambda: wire.scan_address(big))
    # Linear: about 8 (less with the call's fixed cost, more when 8N leaves a CPU cache);
    # quadratic: about 64.
    assert t_big / t_small < 24, f"{case}: N {t_small * 1e6:.1f} us, 8N {t_big * 1e6:.1f} us"


_address_part = st.text(alphabet="ABCDEFabcdef0123456789_.:@-", min_size=1, max_size=60)
_other = st.dictionaries(
    st.text(max_size=10).filter(lambda k: k not in ("_msg_id", "_reply_q")),
    st.one_of(st.text(max_size=30), st.integers(), st.none(), st.lists(st.text(max_size=5))),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(msg_id=_address_part, reply_q=_address_part, other=_other, enveloped=st.booleans())
def test_scan_finds_what_json_finds(
    msg_id: str, reply_q: str, other: dict[str, object], enveloped: bool
) -> None:
    inner = {"_msg_id": msg_id, "_reply_q": reply_q, **other}
    body = _envelope_of(json.dumps(inner)) if enveloped else json.dumps(inner).encode()
    decoded = json.loads(body)
    if enveloped:
        decoded = json.loads(decoded["oslo.message"])
    expected = ReplyAddress(reply_q=decoded["_reply_q"], msg_id=decoded["_msg_id"])
    assert wire.scan_address(body) == expected
    # Cut short (unparseable), the address is still found where it is whole.
    assert wire.scan_address(body[: len(body) - 1]) == expected


_tokens = st.sampled_from(
    [b"\\", b'"', b"_msg_id", b"_reply_q", b":", b" ", b"\n", b"a1", b"{", b",", b"\xff", b"-"]
)


@settings(max_examples=1000, deadline=None)
@given(st.lists(_tokens, max_size=60).map(b"".join))
def test_scan_agrees_with_the_old_pattern(body: bytes) -> None:
    # The new pattern bounds the runs the old one left open: compare where they are in bounds.
    assume(b"\\" * 8 not in body)
    assume(re.search(rb"\s{9}", body) is None)
    assert wire.scan_address(body) == _old_scan(body)


def test_scan_address_on_the_issues_bodies_finds_nothing() -> None:
    for body in (b"\\" * 1_000_000, _envelope_of("\\" * 200_000)):
        assert wire.scan_address(body) is None
