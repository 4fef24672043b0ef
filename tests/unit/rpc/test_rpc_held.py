"""``rpc.held.HeldBytes``: the byte budget's bookkeeping (issue #21, item 8)."""

from __future__ import annotations

from asyncsched.rpc.held import Flow, HeldBytes


def test_bodies_beyond_the_budget_are_refused_and_consuming_pauses() -> None:
    held = HeldBytes(limit=100, prefetch=1000, biggest=40)
    assert held.take(60) and held.take(40)
    assert held.flow == Flow(paused=False, prefetch=1000)
    assert not held.take(1)  # full: handed back
    assert held.flow == Flow(paused=True, prefetch=2) and held.refused == 1
    held.give_back(40)
    assert held.flow.paused  # 60 held: more than half the budget
    held.give_back(60)
    # Resumed with what the budget surely holds: two of the largest messages.
    assert held.flow == Flow(paused=False, prefetch=2)
    assert held.held == 0 and held.peak == 100


def test_one_body_alone_is_taken_whatever_its_size() -> None:
    held = HeldBytes(limit=100, prefetch=10, biggest=1000)
    assert held.take(500) and held.held == 500
    assert not held.take(1)
    held.give_back(500)
    assert held.flow == Flow(paused=False, prefetch=1)


def test_the_full_prefetch_returns_after_a_window_of_small_bodies() -> None:
    held = HeldBytes(limit=1000, prefetch=100, biggest=250)
    assert held.take(900) and not held.take(200)
    held.give_back(900)
    assert held.flow == Flow(paused=False, prefetch=4)
    for _ in range(3):
        assert held.take(10)
        held.give_back(10)
        assert held.flow.prefetch == 4  # 10 x 100 fits, but the window is not over yet
    assert held.take(10)
    held.give_back(10)
    assert held.flow == Flow(paused=False, prefetch=100)
