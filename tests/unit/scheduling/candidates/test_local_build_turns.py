"""LocalCandidates.compute_async: a full answer over many roots gives the event loop turns
(issue #24: no hold of 100 ms at 100,000 providers), and answers as compute does."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from asyncsched.placement.candidates import Candidates
from asyncsched.scheduling.candidates import LocalCandidates, columns
from tests.support.mirror_data import Cloud, request

ROOTS = 40
CHUNK = 4


def cloud() -> Cloud:
    c = Cloud()
    for i in range(ROOTS):
        c.compute(f"h{i:02d}", used={"VCPU": i % 9})
    return c


async def turns_while(coro: Awaitable[Any]) -> tuple[Any, int]:
    """``coro``'s result and the turns another task got while it ran."""
    turns = 0
    done = False

    async def counter() -> None:
        nonlocal turns
        while not done:
            await asyncio.sleep(0)
            turns += not done

    task = asyncio.create_task(counter())
    await asyncio.sleep(0)
    turns = 0
    try:
        got = await coro
    finally:
        done = True
        await task
    return got, turns


def same(a: Any, b: Any) -> None:
    assert isinstance(a, Candidates) and isinstance(b, Candidates)
    assert a.allocation_requests == b.allocation_requests
    assert list(a.provider_summaries.items()) == list(b.provider_summaries.items())
    assert list(a.alloc_reqs_by_rp_uuid.items()) == list(b.alloc_reqs_by_rp_uuid.items())


@pytest.mark.parametrize("reuse", [True, False])
async def test_a_full_build_gives_the_loop_a_turn_every_chunk(
    monkeypatch: pytest.MonkeyPatch, reuse: bool
) -> None:
    monkeypatch.setattr(columns, "BUILD_CHUNK", CHUNK)
    state, req = cloud().state(), request({"VCPU": 1})
    got, turns = await turns_while(
        LocalCandidates(reuse_answers=reuse).compute_async(state, req, {"h03": {"VCPU": 2}})
    )
    assert turns >= ROOTS // CHUNK - 1
    same(got, LocalCandidates(reuse_answers=reuse).compute(state, req, {"h03": {"VCPU": 2}}))


async def test_a_kept_answer_is_served_without_a_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BUILD_CHUNK", CHUNK)
    state, req = cloud().state(), request({"VCPU": 1})
    lc = LocalCandidates()
    first = await lc.compute_async(state, req)
    again, turns = await turns_while(lc.compute_async(state, req))
    assert again is first and turns == 0


async def test_a_build_overtaken_by_a_newer_state_keeps_its_answer_out_of_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two requests build at once on two states: each gets its own state's answer, and the
    older one's answer is not kept as the newer state's."""
    monkeypatch.setattr(columns, "BUILD_CHUNK", CHUNK)
    c = cloud()
    old = c.state()
    for rp_id in range(1, ROOTS + 1, 2):
        c.use(rp_id, VCPU=8)  # full: half the roots leave the answer
    new = c.state()
    req = request({"VCPU": 1})
    lc = LocalCandidates()
    a, b = await asyncio.gather(lc.compute_async(old, req), lc.compute_async(new, req))
    same(a, LocalCandidates().compute(old, req))
    same(b, LocalCandidates().compute(new, req))
    same(await lc.compute_async(new, req), b)


def test_a_request_on_an_older_state_does_not_replace_the_newer_kept_answer() -> None:
    """A request that read the mirror's state before a refresh may ask after one: it gets
    its own state's answer, and the newer state's answer stays kept (served as it is)."""
    c = cloud()
    old = c.state()
    c.use(3, VCPU=8)
    new = old.with_providers(dict(c.providers), {3})
    req = request({"VCPU": 1})
    lc = LocalCandidates()
    newest = lc.compute(new, req)
    same(lc.compute(old, req), LocalCandidates().compute(old, req))
    assert lc.compute(new, req) is newest
