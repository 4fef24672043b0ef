"""Soak: mixed traffic at a steady rate against ``asyncsched serve`` for ``--minutes`` (30).

Not part of ``make bench`` or CI (``make soak``). The whole stack is real and the test's own:
a private RabbitMQ node (so the broker blip touches nobody else), nova databases in
PostgreSQL, a Placement of its own seeded to match, one daemon subprocess, and nova-conductor's
real oslo.messaging client. Every second ``--rate`` jobs start: one-instance boots, 5-instance
multi-creates, fanout casts (instance info), and deletes of old instances (Placement DELETE
plus the delete_instance_info cast, as nova-compute does) so the cloud never fills up. Every
``--blip-every`` seconds the broker is stopped for a second (``stop_app`` / ``start_app``).

Printed each minute and at the end: call latency percentiles, event-loop lag (the daemon
rewrites its health file every 0.25 s from its loop; a longer gap between two writes is lag),
RSS at the start and now, outcome counts.

    .venv/bin/python -m bench.soak [--minutes 30] [--rate 5] [--blip-every 600] [--hosts 12]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tests.support.chaos import (
    ChaosStack,
    HealthBeat,
    Outcome,
    audit,
    boot,
    kinds,
    percentiles,
    roomy_hosts,
)
from tests.support.oslo_caller import OsloSchedulerClient
from tests.support.placement_server import PlacementServer
from tests.support.private_broker import PrivateBroker, private_broker

LIVE_INSTANCES = 1500  # older instances are deleted beyond this many
BEAT = 0.25  # the daemon rewrites its health file this often from its loop: the lag probe


class Traffic:
    """The job mix, its outcomes and the instances alive (to delete the oldest)."""

    def __init__(self, client: OsloSchedulerClient, placement: PlacementServer) -> None:
        self.client = client
        self.placement = placement
        self.lock = threading.Lock()
        self.outcomes: list[Outcome] = []
        self.live: deque[tuple[str, str]] = deque()  # (instance uuid, compute node uuid)
        self.casts = 0
        self.deletes = 0
        self.errors: list[str] = []
        self.hosts: dict[str, str] = {}  # compute node uuid -> host name

    def job(self, rng: random.Random) -> None:
        roll = rng.random()
        try:
            if roll < 0.65:
                self._boot(1)
            elif roll < 0.80:
                self._boot(5)
            elif roll < 0.90:
                self._cast(rng)
            else:
                self._delete()
        except Exception as exc:  # a soak counts every failure and goes on
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])

    def _boot(self, n: int) -> None:
        o = boot(self.client, n)
        with self.lock:
            self.outcomes.append(o)
            if o.kind == "ok":
                self.live.extend(zip(o.uuids, o.hosts, strict=True))

    def _cast(self, rng: random.Random) -> None:
        with self.lock:
            sample = list(self.live)[-20:]
        if not sample:
            return
        inst, node = rng.choice(sample)
        self.client.update_instance_info(self.hosts.get(node, node), [inst])
        with self.lock:
            self.casts += 1

    def _delete(self) -> None:
        with self.lock:
            if len(self.live) <= LIVE_INSTANCES:
                return
            batch = [self.live.popleft() for _ in range(10)]
        asyncio.run(self._delete_allocations([i for i, _ in batch]))
        for inst, node in batch:
            self.client.delete_instance_info(self.hosts.get(node, node), inst)
        with self.lock:
            self.deletes += len(batch)

    async def _delete_allocations(self, uuids: Sequence[str]) -> None:
        async with self.placement.seeder() as s:
            await asyncio.gather(*(s.call("DELETE", f"/allocations/{u}") for u in uuids))


def report(label: str, traffic: Traffic, beat: HealthBeat, rss0: int, rss: int, t0: float) -> None:
    with traffic.lock:
        outcomes = list(traffic.outcomes)
    oks = [o.seconds for o in outcomes if o.kind == "ok"]
    p = percentiles(oks)
    print(
        f"[{label} {time.monotonic() - t0:6.0f} s] calls {len(outcomes)} {kinds(outcomes)}; "
        f"casts {traffic.casts}, deleted {traffic.deletes}, job errors {len(traffic.errors)}; "
        f"latency p50/p95/p99 {p[50] * 1e3:.0f}/{p[95] * 1e3:.0f}/{p[99] * 1e3:.0f} ms; "
        f"{beat.summary()}; "
        f"RSS {rss0 // 1024} -> {rss // 1024} MiB",
        flush=True,
    )


async def soak(args: argparse.Namespace) -> int:
    with private_broker() as rabbit:
        async with ChaosStack(roomy_hosts(args.hosts)) as stack:
            return await run(args, rabbit, stack)


async def run(args: argparse.Namespace, rabbit: PrivateBroker, stack: ChaosStack) -> int:
    url = rabbit.url()
    daemon = stack.daemon(url, refresh_interval=BEAT)
    client = OsloSchedulerClient(url, timeout=120.0, call_monitor_timeout=None)
    traffic = Traffic(client, stack.placement)
    traffic.hosts = {h.uuid: h.host for h in stack.cloud.hosts.values()}
    rng = random.Random(args.seed)
    t0 = time.monotonic()
    end = t0 + args.minutes * 60
    blips: list[float] = []
    try:
        beat = HealthBeat(daemon.conf.parent / "health.json", BEAT, daemon.pid)
        with beat, ThreadPoolExecutor(max_workers=64) as pool:
            await asyncio.sleep(2)
            rss0 = daemon.rss_kb()
            print(
                f"soak: {args.minutes} min, {args.rate} jobs/s, {args.hosts} hosts, "
                f"blip every {args.blip_every} s; daemon RSS at start {rss0 // 1024} MiB",
                flush=True,
            )
            next_report = t0 + 60
            next_blip = t0 + args.blip_every
            tick = t0
            while tick < end:
                for _ in range(args.rate):
                    pool.submit(traffic.job, random.Random(rng.random()))
                tick += 1.0
                now = time.monotonic()
                if now >= next_blip:
                    b0 = time.monotonic()
                    await asyncio.to_thread(rabbit.stop_app)
                    await asyncio.sleep(1)
                    await asyncio.to_thread(rabbit.start_app)
                    blips.append(time.monotonic() - b0)
                    print(f"broker blip: down {blips[-1]:.1f} s", flush=True)
                    next_blip += args.blip_every
                if now >= next_report:
                    report("progress", traffic, beat, rss0, daemon.rss_kb(), t0)
                    next_report += 60
                await asyncio.sleep(max(0.0, tick - time.monotonic()))
            await asyncio.to_thread(pool.shutdown, True)
            report("end", traffic, beat, rss0, daemon.rss_kb(), t0)
    finally:
        client.close()
    found = await audit(stack.placement, stack.cloud)
    with traffic.lock:
        outcomes = list(traffic.outcomes)
    # Deleted instances are gone from Placement on purpose; the rest must match the answers.
    problems = [p for p in found.check(outcomes) if "Placement holds set()" not in p]
    print(
        f"daemon alive: {daemon.alive()}; broker blips {len(blips)}; "
        f"Placement audit: {len(problems)} problems {problems[:3]}",
        flush=True,
    )
    for e in traffic.errors[:5]:
        print("job error:", e)
    return 0 if daemon.alive() and not problems else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.soak", description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=int, default=5, help="jobs started per second")
    parser.add_argument("--blip-every", type=float, default=600.0, help="seconds between blips")
    parser.add_argument("--hosts", type=int, default=12)
    parser.add_argument("--seed", type=int, default=13)
    return asyncio.run(soak(parser.parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
