"""The engine's async entry points give the event loop turns over many hosts (issue #24: no
hold of 100 ms at 100,000 hosts) and decide exactly as the one-piece ones."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable
from typing import Any

import pytest

from asyncsched.objects.models import Aggregate, ImageMeta, ImageMetaProps
from asyncsched.scheduling import columns, engine, verdicts
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.state.host_state import ChangeLog, HostState
from bench.synthetic_cloud import NOW, make_cloud, pipeline
from tests.support.sched_helpers import config, spec

HOSTS = 200
CONF = config(filter_scheduler={"host_subset_size": 1})
SPEC = spec(  # ImagePropertiesFilter and ComputeCapabilitiesFilter judge every host
    memory_mb=2048,
    vcpus=2,
    root_gb=20,
    extra_specs={"capabilities:hypervisor_type": "QEMU"},
    image=ImageMeta(id="i", properties=ImageMetaProps(hw_architecture="x86_64")),
)


def make_engine() -> DecisionEngine:
    filters, weighers = pipeline(CONF)
    return DecisionEngine(CONF, filters, weighers, clock=lambda: NOW, rng=random.Random(0))


def cloud(n: int, seed: int) -> tuple[list[HostState], list[Aggregate]]:
    """``n`` hosts on one ChangeLog, as the daemon's HostTable has them."""
    states, aggs = make_cloud(n, random.Random(seed), overrides=True)
    log = ChangeLog()
    for h in states:
        h.changes = log
    return states, aggs


def decide(
    eng: DecisionEngine, states: list[HostState], aggs: list[Aggregate]
) -> tuple[list[str], None]:
    """The first ten hosts in pick order, by the one-piece path."""
    eng.set_aggregates(aggs)
    rh = eng.start(states)
    if not rh.filter(SPEC, 0):
        return [], None
    return [states[i].host for i in list(rh.pick(SPEC).indices())[:10]], None


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


async def decide_async(eng: DecisionEngine, states: list[Any]) -> tuple[list[str], int]:
    """The first ten hosts in pick order, and the loop turns start and filter gave."""
    rh, started = await turns_while(eng.start_async(states))
    left, filtered = await turns_while(rh.filter_async(SPEC, 0))
    assert left
    order = rh.pick(SPEC).indices()
    return [states[i].host for i in list(order)[:10]], started + filtered


async def test_rows_and_filters_over_many_hosts_give_turns_and_decide_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(columns, "WRITE_CHUNK", 16)
    monkeypatch.setattr(engine, "FILTER_YIELD_HOSTS", 1)
    states, aggs = cloud(HOSTS, 3)
    eng = make_engine()
    eng.set_aggregates(aggs)
    got, turns = await decide_async(eng, states)
    assert turns >= HOSTS // 16 - 1 + len(eng.steps) // 2
    assert got == decide(make_engine(), states, aggs)[0]
    rng = random.Random(1)
    for h in rng.sample(states, 64):  # touched (a heartbeat, a report): rows written again
        h.free_ram_mb = rng.randrange(0, h.total_usable_ram_mb)
        h.touch()
    again, turns = await decide_async(eng, states)
    assert turns >= 64 // 16 - 1
    assert again == decide(make_engine(), states, aggs)[0]


async def test_below_the_sizes_nothing_yields(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path at 10,000 hosts: a request over hosts that did not change gives no turn."""
    monkeypatch.setattr(engine, "FILTER_YIELD_HOSTS", HOSTS + 1)
    states, aggs = cloud(HOSTS, 4)
    eng = make_engine()
    eng.set_aggregates(aggs)
    await decide_async(eng, states)
    got, turns = await decide_async(eng, states)
    assert turns == 0
    assert got == decide(make_engine(), states, aggs)[0]


async def test_hosts_judged_afresh_by_a_kept_verdict_filter_give_turns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ImagePropertiesFilter / ComputeCapabilitiesFilter judging every host (all touched)."""
    monkeypatch.setattr(verdicts, "JUDGE_CHUNK", 16)
    monkeypatch.setattr(engine, "FILTER_YIELD_HOSTS", HOSTS + 1)
    states, aggs = cloud(HOSTS, 5)
    eng = make_engine()
    eng.set_aggregates(aggs)
    rh = await eng.start_async(states)
    left, turns = await turns_while(rh.filter_async(SPEC, 0))
    assert left and eng.verdicts.computed >= HOSTS
    assert turns >= HOSTS // 16 - 1
    order = rh.pick(SPEC).indices()
    assert [states[i].host for i in list(order)[:10]] == decide(make_engine(), states, aggs)[0]
