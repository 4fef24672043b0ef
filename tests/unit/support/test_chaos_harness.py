"""The fault tests' own bookkeeping must be able to fail: the Placement audit and the mutator."""

from __future__ import annotations

import json

from hypothesis import given, settings

from tests.support.chaos import Audit, Outcome, percentiles
from tests.support.fuzz import Mutation, apply, build, mutations, paths

OK = Outcome(("i1", "i2"), "ok", 0.1, hosts=("rp-a", "rp-b"))
FAILED = Outcome(("i3",), "timeout", 60.0)


def audit(
    consumers: dict[str, set[str]],
    over: dict[str, dict[str, tuple[int, int]]] | None = None,
    doubled: frozenset[str] = frozenset(),
) -> Audit:
    return Audit({c: frozenset(r) for c, r in consumers.items()}, over or {}, doubled)


def test_audit_accepts_exactly_what_was_answered() -> None:
    assert audit({"i1": {"rp-a"}, "i2": {"rp-b"}}).check([OK, FAILED]) == []


def test_audit_reports_leaks_doubles_mismatches_and_over_capacity() -> None:
    found = audit(
        {"i1": {"rp-a", "rp-c"}, "i3": {"rp-a"}},
        over={"rp-a": {"MEMORY_MB": (9000, 8192)}},
        doubled=frozenset({"i1"}),
    )
    problems = found.check([OK, FAILED])
    assert any(p.startswith("over capacity: rp-a") for p in problems)
    assert "doubled claim: i1" in problems
    assert any(p.startswith("instance i1: answered rp-a") for p in problems)
    assert any(p.startswith("instance i2: answered rp-b, Placement holds set()") for p in problems)
    assert any(p.startswith("leaked: i3") for p in problems)


def test_audit_leaves_out_what_an_earlier_test_left() -> None:
    before = audit({"old": {"rp-z"}})
    assert audit({"old": {"rp-z"}, "i1": {"rp-a"}, "i2": {"rp-b"}}).check([OK], before) == []


def test_percentiles_nearest_rank() -> None:
    assert percentiles([float(i) for i in range(1, 101)]) == {50: 50.0, 95: 95.0, 99: 99.0}
    assert percentiles([]) == {50: 0.0, 95: 0.0, 99: 0.0}


def test_mutations_touch_every_kind_of_path() -> None:
    msg = {"a": {"b": [1, 2]}, "c": "x"}
    assert list(paths(msg)) == [("a",), ("a", "b"), ("a", "b", 0), ("a", "b", 1), ("c",)]
    assert apply(msg, Mutation("delete", 4)) == {"a": {"b": [1, 2]}}
    assert apply(msg, Mutation("replace", 2, None)) == {"a": {"b": [None, 2]}, "c": "x"}
    assert apply(msg, Mutation("stringify", 1)) == {"a": {"b": "[1, 2]"}, "c": "x"}
    assert msg == {"a": {"b": [1, 2]}, "c": "x"}  # the seed is never changed


@settings(max_examples=200, deadline=None)
@given(mutations)
def test_a_call_is_answerable_only_while_its_reply_address_survives(m: Mutation) -> None:
    seed = {"method": "ping", "args": {"instance_uuids": ["x", "y"]}, "_timeout": 60}
    mutant = build(seed, [m], "reply_q1", None, cast=False)
    message = json.loads(json.loads(mutant.body)["oslo.message"])
    intact = message.get("_reply_q") == "reply_q1" and isinstance(message.get("_msg_id"), str)
    assert (mutant.msg_id is not None) == (intact and message["_msg_id"] == mutant.msg_id)
    broken = build(seed, [m], "reply_q1", "truncate", cast=False)
    assert broken.msg_id is None
