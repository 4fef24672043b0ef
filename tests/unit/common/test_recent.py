"""Recent: at most ``size`` entries, the one used longest ago forgotten first."""

from __future__ import annotations

from asyncsched.common.recent import Recent


def test_put_past_the_size_forgets_the_least_recently_used() -> None:
    r: Recent[str, int] = Recent(2)
    r.put("a", 1)
    r.put("b", 2)
    assert r.get("a") == 1  # now the most recent: b is the oldest
    r.put("c", 3)
    assert (r.peek("a"), r.peek("b"), r.peek("c"), len(r)) == (1, None, 3, 2)


def test_peek_leaves_the_order_and_put_replaces_in_place_of_the_newest() -> None:
    r: Recent[str, int] = Recent(2)
    r.put("a", 1)
    r.put("b", 2)
    assert r.peek("a") == 1  # not moved: a stays the oldest
    r.put("b", 20)  # replaced, still the newest
    r.put("c", 3)
    assert (r.peek("a"), r.peek("b"), r.peek("c")) == (None, 20, 3)
    r.clear()
    assert len(r) == 0 and r.get("b") is None
