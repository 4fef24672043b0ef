"""ClaimCoalescer: lone claims are PUTs, waiting ones share a POST, a refused POST splits."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from asyncsched.exceptions import PlacementError
from asyncsched.placement.coalesce import ClaimCoalescer
from asyncsched.placement.errors import PlacementHTTPError, PlacementTimeout

V = "1.36"


class FakePlacement:
    """Records every write; each answers after ``gate`` is set (so slots stay busy)."""

    def __init__(self, answer: Callable[[str, str, Any], tuple[int, Any]] | None = None) -> None:
        self.writes: list[tuple[str, str, Any, str]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self._answer = answer or (lambda method, path, body: (204, None))

    async def __call__(
        self, method: str, path: str, body: Any, version: str, op: str
    ) -> tuple[int, Any]:
        self.writes.append((method, path, body, version))
        await self.gate.wait()
        return self._answer(method, path, body)

    def posts(self) -> list[list[str]]:
        return [sorted(b) for m, _, b, _ in self.writes if m == "POST"]

    def puts(self) -> list[str]:
        return [p.rsplit("/", 1)[1] for m, p, _, _ in self.writes if m == "PUT"]


def payload(rp: str) -> dict[str, Any]:
    return {"allocations": {rp: {"resources": {"VCPU": 1}}}, "project_id": "p", "user_id": "u"}


Answer = asyncio.Task[tuple[int, Any]]


def claim(co: ClaimCoalescer, name: str, version: str = V) -> Answer:
    """Consumer ``name`` claiming provider ``rp-<name>``."""
    return asyncio.create_task(co.put(name, payload(f"rp-{name}"), version))


async def occupied(fake: FakePlacement, *, max_batch: int = 32) -> tuple[ClaimCoalescer, Answer]:
    """A coalescer with one write slot, taken by claim ``c0`` (the fake's gate is shut)."""
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=max_batch, in_flight=1)
    first = claim(co, "c0")
    await asyncio.sleep(0.01)
    return co, first


async def queued(co: ClaimCoalescer, names: list[str], version: str = V) -> list[Answer]:
    """Claims made while the slot is busy, queued by the time this returns."""
    tasks = [claim(co, n, version) for n in names]
    await asyncio.sleep(0.01)
    return tasks


async def test_a_lone_claim_is_its_own_put_at_once() -> None:
    fake = FakePlacement()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=2)
    assert await co.put("c1", payload("rp1"), V) == (204, None)
    assert fake.puts() == ["c1"] and fake.posts() == []
    assert co.stats.alone == 1 and co.stats.posts == 0


async def test_claims_waiting_for_a_slot_share_one_post() -> None:
    fake = FakePlacement()
    co, first = await occupied(fake)
    assert fake.puts() == ["c0"]  # the slot is taken
    rest = await queued(co, [f"c{i}" for i in range(1, 6)])
    assert len(fake.writes) == 1  # nothing else leaves while the slot is busy
    fake.gate.set()
    assert await first == (204, None)
    assert [await t for t in rest] == [(204, None)] * 5
    assert fake.posts() == [["c1", "c2", "c3", "c4", "c5"]]
    method, path, body, version = fake.writes[1]
    assert (method, path, version) == ("POST", "/allocations", V)
    assert body["c3"] == payload("rp-c3")
    assert co.stats.posts == 1 and co.stats.posted == 5 and co.stats.largest == 5


async def test_batches_respect_max_batch_and_do_not_mix_microversions() -> None:
    fake = FakePlacement()
    co, first = await occupied(fake, max_batch=3)
    tasks = [first, *await queued(co, [f"a{i}" for i in range(4)])]
    tasks += await queued(co, [f"b{i}" for i in range(2)], "1.38")
    fake.gate.set()
    await asyncio.gather(*tasks)
    posts = [(sorted(b), v) for m, _, b, v in fake.writes if m == "POST"]
    assert posts == [(["a0", "a1", "a2"], V), (["b0", "b1"], "1.38")]
    assert fake.puts() == ["c0", "a3"]  # a3 was left alone in its batch: a PUT


async def test_a_refused_post_sends_each_member_alone_with_its_own_answer() -> None:
    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST":
            return 409, {"errors": [{"detail": "Unable to allocate inventory", "code": "x"}]}
        return (409, {"errors": []}) if path.endswith("/bad") else (204, None)

    fake = FakePlacement(answer)
    co, first = await occupied(fake)
    names = ["good1", "bad", "good2"]
    tasks = await queued(co, names)
    fake.gate.set()
    await first
    got = dict(zip(names, [await t for t in tasks], strict=True))
    assert got["good1"] == got["good2"] == (204, None) and got["bad"][0] == 409
    assert fake.posts() == [sorted(names)] and sorted(fake.puts()) == sorted(["c0", *names])
    assert co.stats.refused == 1 and co.stats.posted == 0


async def post_raising(
    exc: Exception,
) -> tuple[FakePlacement, ClaimCoalescer, Answer, list[Answer]]:
    """c0 alone, then c1 and c2 queued behind it into one POST that raises ``exc``; released."""

    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST":
            raise exc
        return 204, None

    fake = FakePlacement(answer)
    co, first = await occupied(fake)
    shared = await queued(co, ["c1", "c2"])
    fake.gate.set()
    return fake, co, first, shared


async def test_a_post_that_may_have_landed_reaches_every_member_as_its_error() -> None:
    fake, _, first, tasks = await post_raising(PlacementTimeout("no answer within 30 s"))
    await first
    for t in tasks:
        with pytest.raises(PlacementTimeout):
            await t
    assert fake.puts() == ["c0"]  # not resent: each caller deletes what may have landed


async def test_a_post_answered_with_a_server_error_falls_back_to_puts() -> None:
    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST":
            raise PlacementHTTPError("HTTP 500", 500)
        return 204, None

    fake = FakePlacement(answer)
    co, first = await occupied(fake)
    tasks = await queued(co, ["c1", "c2"])
    fake.gate.set()
    assert [await t for t in (first, *tasks)] == [(204, None)] * 3
    assert sorted(fake.puts()) == ["c0", "c1", "c2"]


async def test_a_caller_that_gives_up_while_queued_is_not_written() -> None:
    fake = FakePlacement()
    co, first = await occupied(fake)
    gone, kept = await queued(co, ["gone", "kept"])
    gone.cancel()
    fake.gate.set()
    await first
    assert await kept == (204, None)
    assert "gone" not in fake.puts() and fake.posts() == []


async def test_close_answers_queued_and_in_flight_claims_with_an_error() -> None:
    fake = FakePlacement()
    co, flying = await occupied(fake)
    (waiting,) = await queued(co, ["c1"])
    await co.close()
    for t in (flying, waiting):
        with pytest.raises(PlacementError, match="closed"):
            await t


async def test_an_unexpected_error_fails_its_claims_by_name_and_the_writer_goes_on() -> None:
    _, co, first, shared = await post_raising(RuntimeError("bug in the writer"))
    assert await first == (204, None)
    for t in shared:
        with pytest.raises(PlacementError, match="failed unexpectedly: RuntimeError"):
            await t
    assert await co.put("c3", payload("rp-c3"), V) == (204, None)  # the slot was given back


async def test_old_microversions_never_post() -> None:
    fake = FakePlacement()
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    tasks = await queued(co, ["c0", "c1", "c2"], "1.12")
    fake.gate.set()
    await asyncio.gather(*tasks)
    assert fake.posts() == [] and sorted(fake.puts()) == ["c0", "c1", "c2"]
