"""Three ``asyncsched serve`` processes on one scheduler queue, as an HA deployment runs them.

* One is killed with SIGKILL while it holds requests (unacked): RabbitMQ redelivers them to
  the other two, every call is answered once, and Placement holds exactly the answered claims
  (nothing the dead process claimed half-way stays behind).
* A tight cloud that fits N instances gets 2N from concurrent real oslo callers (single boots
  and small multi-creates): no provider ends over capacity, every instance is answered ok or
  NoValidHost, nothing leaks. With ``[asyncsched] overcommit_guard = false`` the same run shows
  Placement's race (providers over capacity) in about one repeat in ten (``make chaos`` only).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
import pytest_asyncio

from tests.support import broker
from tests.support.chaos import (
    ChaosStack,
    Outcome,
    audit,
    boot,
    figure,
    kinds,
    latency_line,
    roomy_hosts,
    run_calls,
    size,
    tight_hosts,
)
from tests.support.oslo_caller import OsloSchedulerClient
from tests.support.placement_relay import Relay

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def roomy() -> AsyncIterator[ChaosStack]:
    async with ChaosStack(roomy_hosts(6)) as s:
        yield s


async def test_sigkill_one_of_three_mid_batch(roomy: ChaosStack, amqp_url: str) -> None:
    calls, per_call = size(12, 40), 5
    before = await audit(roomy.placement, roomy.cloud)
    relay = Relay(roomy.placement.port)
    await relay.start()
    client = OsloSchedulerClient(amqp_url, timeout=120.0, call_monitor_timeout=None)
    try:
        # (The relay runs on this loop: start the daemon from a thread.)
        victim = await asyncio.to_thread(
            roomy.daemon, amqp_url, placement_url=f"http://127.0.0.1:{relay.port}"
        )
        relay.flowing.clear()  # the victim takes the calls, then waits on Placement
        with ThreadPoolExecutor(max_workers=calls) as pool:
            futures = [pool.submit(boot, client, per_call) for _ in range(calls)]
            await asyncio.wait_for(relay.candidates_seen.wait(), 60)
            others = [roomy.daemon(amqp_url, ready=False) for _ in range(2)]
            for d in others:
                await asyncio.to_thread(d.wait_ready)
            rows = broker.list_json(
                "list_queues", broker_vhost(amqp_url), "name", "messages_unacknowledged"
            )
            held = {q["name"]: q for q in rows}["scheduler"]["messages_unacknowledged"]
            # Let the victim's claims start (one is in Placement, its answer maybe not back
            # yet), then kill: the redelivered calls meet what the dead process claimed.
            relay.delay = 0.05
            relay.flowing.set()
            await asyncio.wait_for(relay.claim_seen.wait(), 60)
            await asyncio.sleep(0.2)
            t_kill = time.monotonic()
            victim.kill()
            # Wait off the loop: the relay lives on it, and a blocked relay keeps the dead
            # process's connections to Placement open, holding its workers from the others.
            await asyncio.to_thread(wait, futures, 300)
            outcomes: list[Outcome] = [f.result() for f in futures]
            t_done = time.monotonic()
    finally:
        client.close()
        await relay.close()
    found = await audit(roomy.placement, roomy.cloud)
    adopted = sum(d.stderr().count("already holds allocations") for d in others)
    figure(
        "SIGKILL 1 of 3",
        f"{calls} calls x {per_call} instances; {held} unacked at the kill; outcomes "
        f"{kinds(outcomes)}; {adopted} claims of the dead process adopted; "
        f"all answered {t_done - t_kill:.1f} s after the kill; "
        f"{latency_line(outcomes)}",
    )
    assert held > 0, roomy.stderr_tails()
    problems = found.check(outcomes, before)
    failed = [o.detail for o in outcomes if o.kind != "ok"]
    assert (kinds(outcomes), problems) == ({"ok": calls}, []), (
        failed[:3],
        problems[:6],
        roomy.stderr_tails(),
    )
    for d in others:
        assert d.alive() and "Traceback" not in d.stderr(), d.stderr()[-4000:]


def broker_vhost(url: str) -> str:
    return url.rsplit("/", 1)[1]


# --- a tight cloud ---------------------------------------------------------------------------

HOSTS, PER_HOST = size(6, 12), 4
CAPACITY = HOSTS * PER_HOST


def tight_jobs(client: OsloSchedulerClient, capacity: int) -> list[Callable[[], Outcome]]:
    """2N instances: half as single boots, half as multi-creates of 4."""
    singles: list[Callable[[], Outcome]] = [lambda: boot(client, 1)] * capacity
    multis: list[Callable[[], Outcome]] = [lambda: boot(client, 4)] * (capacity // 4)
    jobs = [j for pair in zip(singles[: len(multis)], multis, strict=True) for j in pair]
    return jobs + singles[len(multis) :]


async def run_tight(
    amqp_url: str, guard: bool, hosts: int = HOSTS, per_host: int = PER_HOST
) -> tuple[list[Outcome], list[str], float]:
    async with ChaosStack(tight_hosts(hosts, per_host), placement_workers=4) as stack:
        # The three reach Placement through one relay that lets claims on one host up in
        # threes: claims decided at about the same time land together, as under a real burst.
        relay = Relay(stack.placement.port)
        await relay.start()
        relay.claim_group = 3
        extra = {} if guard else {"overcommit_guard": "false"}
        url = f"http://127.0.0.1:{relay.port}"
        for _ in range(3):
            stack.daemon(amqp_url, ready=False, extra=extra, placement_url=url)
        for d in stack.daemons:
            await asyncio.to_thread(d.wait_ready)
        client = OsloSchedulerClient(amqp_url, timeout=180.0, call_monitor_timeout=None)
        t0 = time.monotonic()
        try:
            outcomes = await asyncio.to_thread(run_calls, tight_jobs(client, hosts * per_host))
        finally:
            client.close()
            await relay.close()
        took = time.monotonic() - t0
        together = sum(1 for g in relay.claim_groups if g > 1)
        figure(
            f"tight cloud, guard {'on' if guard else 'off'}: claim groups",
            f"{len(relay.claim_groups)} released, {together} of them with more than one claim",
        )
        found = await audit(stack.placement, stack.cloud)
        for d in stack.daemons:
            assert d.alive() and "Traceback" not in d.stderr(), d.stderr()[-4000:]
        return outcomes, found.check(outcomes), took


async def test_tight_cloud_three_schedulers_never_overcommit(amqp_url: str) -> None:
    outcomes, problems, took = await run_tight(amqp_url, guard=True)
    placed = sum(len(o.uuids) for o in outcomes if o.kind == "ok")
    figure(
        "tight cloud, guard on",
        f"capacity {CAPACITY}, {2 * CAPACITY} instances in {len(outcomes)} calls, 3 schedulers: "
        f"outcomes {kinds(outcomes)}, {placed} placed, {len(problems)} problems, {took:.1f} s; "
        f"{latency_line(outcomes)}",
    )
    assert set(kinds(outcomes)) <= {"ok", "novalidhost"}, [
        o for o in outcomes if o.kind not in ("ok", "novalidhost")
    ][:3]
    assert problems == []
    assert placed <= CAPACITY


# Placement's race is a matter of timing: a run shows it or not as a whole (the three daemons'
# first claims race or go one after another). On 2026-11-27 it showed in about one round in
# ten (9 rounds alone on a quiet machine; none of 12 in one full suite; within 1 to 3 in three
# others), each round about 10 s: a chance, not a check, so it runs in ``make chaos``. Placement's
# race itself stays in ``make test``: test_overcommit_real.py's guard-off rounds and its two
# racers made certain.
RACE_ROUNDS = 40


@pytest.mark.chaos_big
async def test_tight_cloud_without_the_guard_shows_the_race(amqp_url: str) -> None:
    """Hosts of one slot each: the three schedulers rank hosts alike, so calls they take at
    the same moment claim the same host, and every such pair is Placement's race (a host of
    several slots is only raced for its last one). The same run as above with the guard off,
    repeated until one ends over capacity: it shows that the guard is what keeps the other
    test's clouds within capacity."""
    for r in range(1, RACE_ROUNDS + 1):
        outcomes, problems, took = await run_tight(amqp_url, guard=False, hosts=12, per_host=1)
        over = [p for p in problems if p.startswith("over capacity")]
        figure(
            "tight cloud, guard off",
            f"round {r}: capacity 12 on 12 one-slot hosts, 24 instances: outcomes "
            f"{kinds(outcomes)}, {len(over)} providers over capacity, {took:.1f} s",
        )
        if over:
            return
    raise AssertionError(f"no provider over capacity without the guard in {RACE_ROUNDS} runs")
