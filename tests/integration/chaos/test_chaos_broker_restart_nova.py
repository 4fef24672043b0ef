"""The broker restart of ``test_chaos_broker_restart.py`` (nova's default transient queues),
served once by asyncsched and once by the REAL nova-scheduler (nova 34 from PyPI), as issue
#13's baseline: how many calls each answers and loses when the broker drops what it held.

Both runs share one cloud: nova's own databases (made by nova-manage, full schema; see
``tests/support/nova_scheduler.py``), seeded with the same 8 roomy hosts in 2 cells and an AZ
aggregate as the other broker-restart test, and one real Placement seeded to match. Each run
gets a fresh private RabbitMQ node, its scheduler, and 4 real oslo.messaging callers (4
transports, so 4 reply queues) with ``CALLS`` boots in flight between them. When the first 3
answers are back: ``stop_app``, 1 s, ``start_app``. Then one caller probes with new calls (10 s
timeout each) until one is answered, the rest wait for their answers or their timeout, and a
last call must be answered. Placement is audited after each run. The ``scheduler`` queue's
depth when ``stop_app`` is sent shows where the calls were: nova's oslo.messaging consumer
runs with ``rabbit_qos_prefetch_count = 0`` (unlimited), so its workers take every call into
the process at once, and asyncsched holds up to ``[asyncsched] max_held_requests`` (1000).
Before that option it held only the 32 it ran, left the rest in RabbitMQ, and the transient
queue lost them (48 to 56 of 200 answered, against nova's 200).

nova-scheduler runs with nova's defaults (one worker per CPU, threading backend) and the values
``ChaosStack.daemon`` gives asyncsched: the same filters, the same Placement timeout,
``service_down_time`` high. Both get the same oslo.messaging reconnect delays,
``FAST_RECONNECT``: the 0.2 s ones of the other test are not valid for nova (integer options).

Chaos-only (``make chaos``): installing nova (about 45 s, once) and nova-manage (20 to 30 s)
come before any call, and at the issue's size a run waits out the 180 s caller timeout of its
lost calls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import aio_pika
import pytest
import pytest_asyncio

from tests.support.chaos import (
    Outcome,
    audit,
    boot,
    figure,
    first_answers,
    kinds,
    latency_line,
    roomy_hosts,
    size,
)
from tests.support.nova_scheduler import (
    FAST_RECONNECT,
    NovaChaosStack,
    ensure_nova_venv,
    nova_worker_count,
    wait_consumed,
)
from tests.support.oslo_caller import OsloSchedulerClient
from tests.support.private_broker import PrivateBroker, private_broker

pytestmark = [
    pytest.mark.integration,
    pytest.mark.chaos_big,
    pytest.mark.asyncio(loop_scope="module"),
]

CALLS = size(60, 200)
CLIENTS = 4
CALL_TIMEOUT = float(size(60, 180))  # as the other broker-restart test: late is not lost
PROBE_TIMEOUT = 10.0
PROBE_LIMIT = 120.0
SCHEDULERS = ("asyncsched", "nova-scheduler")


@dataclass
class Run:
    """What one scheduler's run came to."""

    outcomes: list[Outcome]
    probes: list[Outcome]
    answered_early: int  # calls done when stop_app was sent
    ok_early: int
    waiting: int  # messages ready in the scheduler queue as stop_app was sent
    consumers: int  # the scheduler queue's consumers then
    outage: float  # stop_app sent .. start_app returned
    first_answer: float | None  # s after start_app: the first answer to any burst call
    first_new_ok: float | None  # s after start_app: a call made after it, answered ok
    last_ok: float | None  # s after start_app: the last ok answer of the burst
    problems: list[str]
    consuming: float  # s from start until the scheduler queue had all its consumers

    @property
    def counts(self) -> dict[str, int]:
        got = kinds(self.outcomes)
        return {
            "ok": got.get("ok", 0),
            "novalidhost": got.get("novalidhost", 0),
            "lost": got.get("timeout", 0),
            "error": got.get("error", 0),
        }

    def problem_counts(self) -> dict[str, int]:
        """Audit problems by kind; a leak of a probe call (answered after its short timeout,
        so its caller gave up) is counted apart from the burst's."""
        probe_ids = {u for o in self.probes for u in o.uuids}
        out = {"over capacity": 0, "doubled claim": 0, "leaked": 0, "probe": 0, "not held": 0}
        for p in self.problems:
            key = next((k for k in out if p.startswith(k)), "not held")
            if key == "leaked" and p.split()[1] in probe_ids:
                key = "probe"
            out[key] += 1
        return out


RESULTS: dict[str, Run] = {}


def _secs(value: float | None, none: str = "never") -> str:
    return none if value is None else f"{value:.1f} s"


def describe(name: str, run: Run) -> str:
    c, p = run.counts, run.problem_counts()
    lost_probes = sum(1 for o in run.probes if o.kind != "ok")
    return "; ".join(
        [
            f"{name}: {CALLS} calls from {CLIENTS} oslo clients, {run.answered_early} answered "
            f"before stop_app, {run.waiting} waiting in the scheduler queue "
            f"({run.consumers} consumers) when stop_app was sent",
            f"ok {c['ok']}, NoValidHost {c['novalidhost']}, lost {c['lost']} (caller timeout), "
            f"errors {c['error']}",
            f"audit: doubled claims {p['doubled claim']}, over capacity {p['over capacity']}, "
            f"leaked {p['leaked']} (and {p['probe']} of probe calls answered after their "
            f"{PROBE_TIMEOUT:g} s timeout), answers Placement does not hold {p['not held']}",
            f"outage {run.outage:.1f} s",
            f"after start_app: first answer {_secs(run.first_answer)}, first new call ok "
            f"{_secs(run.first_new_ok)} ({lost_probes} probe calls lost first), last ok "
            f"{_secs(run.last_ok, 'none')}",
            latency_line(run.outcomes),
        ]
    )


def probe(clients: Sequence[OsloSchedulerClient]) -> list[Outcome]:
    """New calls, one at a time with a short timeout, until one is answered ok."""
    got: list[Outcome] = []
    deadline = time.monotonic() + PROBE_LIMIT
    while time.monotonic() < deadline:
        outcome = boot(clients[len(got) % len(clients)], 1, timeout=PROBE_TIMEOUT)
        got.append(outcome)
        if outcome.kind == "ok":
            break
        if outcome.kind != "timeout":
            time.sleep(0.5)  # an error or NoValidHost comes back at once: do not spin
    return got


async def restart_run(
    rabbit: PrivateBroker, clients: Sequence[OsloSchedulerClient]
) -> tuple[list[Outcome], Run]:
    """The burst, the restart, the probe; returns (warm-up and last call, the run)."""
    warm = await asyncio.gather(*(asyncio.to_thread(boot, c, 1) for c in clients))
    # Opened beforehand, so that looking at the queue adds milliseconds, not a connection.
    looker = await aio_pika.connect(rabbit.amqp_url(), timeout=10)
    with ThreadPoolExecutor(max_workers=CALLS) as pool:
        futures = [pool.submit(boot, clients[i % CLIENTS], 1) for i in range(CALLS)]
        await first_answers(futures, 3)  # cut while calls are in flight
        answered_early = sum(f.done() for f in futures)
        ok_early = sum(f.done() and f.result().kind == "ok" for f in futures)
        async with looker:
            declared = await (await looker.channel()).declare_queue("scheduler", passive=True)
        depth = declared.declaration_result
        t_stop = time.monotonic()
        await asyncio.to_thread(rabbit.stop_app)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(rabbit.start_app)
        t_up = time.monotonic()
        probes = await asyncio.to_thread(probe, clients)
        await asyncio.to_thread(wait, futures, CALL_TIMEOUT * 3)
        outcomes = [f.result() for f in futures]
    after = await asyncio.to_thread(boot, clients[0], 1)
    ends_after = sorted(o.started + o.seconds - t_up for o in outcomes if o.kind != "timeout")
    ends_after = [e for e in ends_after if e >= 0]
    ok_ends = [o.started + o.seconds - t_up for o in outcomes if o.kind == "ok"]
    new_ok = [o.started + o.seconds - t_up for o in probes if o.kind == "ok"]
    run = Run(
        outcomes=outcomes,
        probes=probes,
        answered_early=answered_early,
        ok_early=ok_early,
        waiting=depth.message_count or 0,
        consumers=depth.consumer_count or 0,
        outage=t_up - t_stop,
        first_answer=ends_after[0] if ends_after else None,
        first_new_ok=new_ok[0] if new_ok else None,
        last_ok=max(ok_ends) if ok_ends and max(ok_ends) >= 0 else None,
        problems=[],
        consuming=0.0,
    )
    return [*warm, after], run


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack() -> AsyncIterator[NovaChaosStack]:
    await asyncio.to_thread(ensure_nova_venv)
    t0 = time.monotonic()
    async with NovaChaosStack(roomy_hosts(8)) as s:
        figure(
            "broker restart beside nova-scheduler: set-up",
            f"nova's databases (nova-manage) and the seeded cloud in "
            f"{time.monotonic() - t0:.1f} s; compute services at nova's SERVICE_VERSION "
            f"{s.service_version}",
        )
        yield s
    if all(name in RESULTS for name in SCHEDULERS):
        ra, rn = RESULTS["asyncsched"], RESULTS["nova-scheduler"]
        a, n = ra.counts, rn.counts
        pa, pn = ra.problem_counts(), rn.problem_counts()
        figure(
            "broker restart [transient], nova-scheduler vs asyncsched",
            f"{CALLS} calls each: ok {n['ok']} vs {a['ok']}, lost {n['lost']} vs {a['lost']}, "
            f"NoValidHost {n['novalidhost']} vs {a['novalidhost']}, errors {n['error']} vs "
            f"{a['error']}; waiting in the scheduler queue at stop_app {rn.waiting} vs "
            f"{ra.waiting}; doubled claims {pn['doubled claim']} vs {pa['doubled claim']}, "
            f"over capacity {pn['over capacity']} vs {pa['over capacity']}, leaked "
            f"{pn['leaked']} vs {pa['leaked']}; after start_app: first new call ok "
            f"{_secs(rn.first_new_ok)} vs {_secs(ra.first_new_ok)}, last ok "
            f"{_secs(rn.last_ok, 'none')} vs {_secs(ra.last_ok, 'none')}",
        )


@pytest.mark.parametrize("scheduler", SCHEDULERS)
async def test_broker_restart_transient_beside_nova(stack: NovaChaosStack, scheduler: str) -> None:
    before = await audit(stack.placement, stack.cloud)
    with private_broker() as rabbit:
        url = rabbit.url()
        t0 = time.monotonic()
        alive: Callable[[], bool]
        log: Callable[[], str]
        stop: Callable[[], None]
        if scheduler == "asyncsched":
            daemon = stack.daemon(url, rabbit=FAST_RECONNECT)  # READY: loaded and consuming
            alive, log, stop = daemon.alive, daemon.stderr, daemon.stop
            await asyncio.to_thread(wait_consumed, rabbit, "scheduler", 1, 60.0)
            label = "asyncsched (1 process)"
        else:
            nova = stack.nova_scheduler(url)
            alive, log, stop = nova.alive, nova.log_text, nova.stop
            workers = nova_worker_count()
            await asyncio.to_thread(nova.wait_consuming, rabbit, workers)
            label = f"nova-scheduler ({workers} workers)"
        consuming = time.monotonic() - t0
        clients = [
            OsloSchedulerClient(url, timeout=CALL_TIMEOUT, call_monitor_timeout=None)
            for _ in range(CLIENTS)
        ]
        try:
            extra, run = await restart_run(rabbit, clients)
        finally:
            for c in clients:
                c.close()
        still_alive = alive()
        text = log()
        stop()
    run.consuming = consuming
    found = await audit(stack.placement, stack.cloud)
    run.problems = found.check([*extra, *run.probes, *run.outcomes], before)
    RESULTS[scheduler] = run
    figure(
        f"broker restart [transient] beside nova-scheduler: {scheduler}",
        f"consuming {consuming:.1f} s after start; {describe(label, run)}",
    )
    tail = text[-6000:]
    warm, after = extra[:CLIENTS], extra[CLIENTS]
    # It ran and answered before the restart, and again after it.
    assert [o.kind for o in warm] == ["ok"] * CLIENTS, (warm, tail)
    assert run.ok_early >= 3, (run.answered_early, tail)
    assert after.kind == "ok", (after, tail)
    assert still_alive, tail
    # Never: a doubled claim, a provider over capacity, an answer Placement does not hold.
    assert not [p for p in run.problems if not p.startswith("leaked")], run.problems
    # A claim whose reply the broker lost is held only by instances whose call failed.
    lost = {u for o in [*run.outcomes, *run.probes] if o.kind != "ok" for u in o.uuids}
    leaked = {p.split()[1] for p in run.problems if p.startswith("leaked")}
    assert leaked <= lost, run.problems
