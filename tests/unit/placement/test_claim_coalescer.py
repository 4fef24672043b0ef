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


async def test_a_lone_claim_is_its_own_put_at_once() -> None:
    fake = FakePlacement()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=2)
    assert await co.put("c1", payload("rp1"), V) == (204, None)
    assert fake.puts() == ["c1"] and fake.posts() == []
    assert co.stats.alone == 1 and co.stats.posts == 0


async def test_claims_waiting_for_a_slot_share_one_post() -> None:
    fake = FakePlacement()
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    first = asyncio.create_task(co.put("c0", payload("rp0"), V))
    await asyncio.sleep(0.01)
    assert fake.puts() == ["c0"]  # the slot is taken
    rest = [asyncio.create_task(co.put(f"c{i}", payload(f"rp{i}"), V)) for i in range(1, 6)]
    await asyncio.sleep(0.01)
    assert len(fake.writes) == 1  # nothing else leaves while the slot is busy
    fake.gate.set()
    assert await first == (204, None)
    assert [await t for t in rest] == [(204, None)] * 5
    assert fake.posts() == [["c1", "c2", "c3", "c4", "c5"]]
    method, path, body, version = fake.writes[1]
    assert (method, path, version) == ("POST", "/allocations", V)
    assert body["c3"] == payload("rp3")
    assert co.stats.posts == 1 and co.stats.posted == 5 and co.stats.largest == 5


async def test_batches_respect_max_batch_and_do_not_mix_microversions() -> None:
    fake = FakePlacement()
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=3, in_flight=1)
    tasks = [asyncio.create_task(co.put("c0", payload("rp0"), V))]
    await asyncio.sleep(0.01)
    tasks += [asyncio.create_task(co.put(f"a{i}", payload(f"ra{i}"), V)) for i in range(4)]
    tasks += [asyncio.create_task(co.put(f"b{i}", payload(f"rb{i}"), "1.38")) for i in range(2)]
    await asyncio.sleep(0.01)
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
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    first = asyncio.create_task(co.put("c0", payload("rp0"), V))
    await asyncio.sleep(0.01)
    names = ["good1", "bad", "good2"]
    tasks = [asyncio.create_task(co.put(n, payload(n), V)) for n in names]
    await asyncio.sleep(0.01)
    fake.gate.set()
    await first
    got = dict(zip(names, [await t for t in tasks], strict=True))
    assert got["good1"] == got["good2"] == (204, None) and got["bad"][0] == 409
    assert fake.posts() == [sorted(names)] and sorted(fake.puts()) == sorted(["c0", *names])
    assert co.stats.refused == 1 and co.stats.posted == 0


async def test_a_post_that_may_have_landed_reaches_every_member_as_its_error() -> None:
    def answer(method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST":
            raise PlacementTimeout("no answer within 30 s")
        return 204, None

    fake = FakePlacement(answer)
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    first = asyncio.create_task(co.put("c0", payload("rp0"), V))
    await asyncio.sleep(0.01)
    tasks = [asyncio.create_task(co.put(f"c{i}", payload(f"rp{i}"), V)) for i in (1, 2)]
    await asyncio.sleep(0.01)
    fake.gate.set()
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
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    first = asyncio.create_task(co.put("c0", payload("rp0"), V))
    await asyncio.sleep(0.01)
    tasks = [asyncio.create_task(co.put(f"c{i}", payload(f"rp{i}"), V)) for i in (1, 2)]
    await asyncio.sleep(0.01)
    fake.gate.set()
    assert [await t for t in (first, *tasks)] == [(204, None)] * 3
    assert sorted(fake.puts()) == ["c0", "c1", "c2"]


async def test_a_caller_that_gives_up_while_queued_is_not_written() -> None:
    fake = FakePlacement()
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    first = asyncio.create_task(co.put("c0", payload("rp0"), V))
    await asyncio.sleep(0.01)
    gone = asyncio.create_task(co.put("gone", payload("rpg"), V))
    kept = asyncio.create_task(co.put("kept", payload("rpk"), V))
    await asyncio.sleep(0.01)
    gone.cancel()
    fake.gate.set()
    await first
    assert await kept == (204, None)
    assert "gone" not in fake.puts() and fake.posts() == []


async def test_close_answers_queued_and_in_flight_claims_with_an_error() -> None:
    fake = FakePlacement()
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    flying = asyncio.create_task(co.put("c0", payload("rp0"), V))
    await asyncio.sleep(0.01)
    queued = asyncio.create_task(co.put("c1", payload("rp1"), V))
    await asyncio.sleep(0.01)
    await co.close()
    for t in (flying, queued):
        with pytest.raises(PlacementError, match="closed"):
            await t


async def test_old_microversions_never_post() -> None:
    fake = FakePlacement()
    fake.gate.clear()
    co = ClaimCoalescer(fake, max_batch=32, in_flight=1)
    tasks = [asyncio.create_task(co.put(f"c{i}", payload(f"rp{i}"), "1.12")) for i in range(3)]
    await asyncio.sleep(0.01)
    fake.gate.set()
    await asyncio.gather(*tasks)
    assert fake.posts() == [] and sorted(fake.puts()) == ["c0", "c1", "c2"]
