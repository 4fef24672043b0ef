"""Capacity benchmark: how long ``GET /v1/capacity`` takes to fill a 10,000-host cloud.

The hosts are the synthetic cloud of ``bench.bench_scheduling``; Placement is an in-memory
answer built from the same hosts (every host a candidate, capacity and usage in
``provider_summaries``), so the figure is the capacity computation itself (a real Placement
adds its own ``GET /allocation_candidates`` time on top). While it runs, a ticker task
measures the longest event-loop stall, which is what the live scheduler would wait; the
cloud's heap is frozen out of the garbage collector first, as the daemon freezes its loaded
cache.

The baseline is the obvious way to answer the question with the scheduler: one sequential
multi-create decision (filter, weigh, pick, consume on a copy) per instance, timed on the
first ``--sample`` instances and extrapolated to the count found.

    .venv/bin/python -m bench.bench_capacity [--hosts 1000,10000] [--sample 300]

``--tiny`` runs issue #21's request instead (``vcpus=0&ram=1&disk=0``: hundreds of thousands
of instances) with the daemon's default bounds (``capacity_max_instances``,
``admin_dry_run_timeout``), beside the same run cut at a tenth of the cap as the baseline:
a bounded run costs in proportion to its cap, and says it was bounded.

    .venv/bin/python -m bench.bench_capacity --tiny [--hosts 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import time
from collections.abc import Awaitable, Sequence
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.objects.models import (
    Aggregate,
    CellMapping,
    Flavor,
    RequestContext,
    RequestSpec,
)
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.capacity import Bounds, capacity
from asyncsched.scheduling.dryrun import DryRunManager
from asyncsched.scheduling.manager import Offer
from asyncsched.state.host_state import HostState
from bench.synthetic_cloud import NOW, make_cloud

FLAVOR = Flavor(memory_mb=4096, vcpus=2, root_gb=40, name="m1.medium")
TINY = Flavor(memory_mb=1, vcpus=0, root_gb=0, name="tiny")  # issue #21: vcpus=0&ram=1&disk=0


class MemoryCloud:
    """The host-state cache and Placement's candidates, both from one list of HostStates."""

    def __init__(self, hosts: list[HostState], aggs: list[Aggregate]) -> None:
        self.hosts = hosts
        self.aggs = aggs
        self.by_uuid = {h.uuid: h for h in hosts}

    @property
    def hosts_epoch(self) -> int:
        return hash(tuple(self.by_uuid))

    def get_by_uuids(self, uuids: Any) -> list[HostState]:
        return [self.by_uuid[u] for u in uuids if u in self.by_uuid]

    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]:
        return [h for h in self.hosts if h.host == host and node in (None, h.nodename)]

    def all_hosts(self) -> list[HostState]:
        return list(self.hosts)

    def cells(self) -> list[CellMapping]:
        return [CellMapping(uuid=u) for u in sorted({h.cell_uuid for h in self.hosts})]

    def aggregates(self) -> list[Aggregate]:
        return list(self.aggs)

    def consume_locked(self, *args: Any, **kw: Any) -> None:
        raise AssertionError("capacity must not consume on the live cache")

    async def release(self, *args: Any) -> None:
        raise AssertionError("capacity must not release on the live cache")

    async def release_many(self, *args: Any) -> None:
        raise AssertionError("capacity must not release on the live cache")

    async def fresh_services(self) -> None:
        return None

    async def begin_fresh_services(self) -> Awaitable[None]:
        raise AssertionError("capacity runs no request")

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        """Built in a worker thread: a real Placement's work is not on our event loop."""
        return await asyncio.to_thread(self._candidates, request)

    def _candidates(self, request: ResourceRequest) -> Candidates:
        want = request.merged_resources()
        areqs, summaries = [], {}
        for h in self.hosts:
            inv = {
                "VCPU": (int(h.vcpus_total * h.cpu_allocation_ratio), h.vcpus_used),
                "MEMORY_MB": (h.total_usable_ram_mb, h.total_usable_ram_mb - h.free_ram_mb),
                "DISK_GB": (
                    h.total_usable_disk_gb,
                    h.total_usable_disk_gb - h.free_disk_mb // 1024,
                ),
            }
            if all(inv[rc][0] - inv[rc][1] >= n for rc, n in want.items() if rc in inv):
                res = {rc: {"resources": dict(want)} for rc in ("",)}
                areqs.append({"allocations": {h.uuid: res[""]}, "mappings": {"": [h.uuid]}})
                summaries[h.uuid] = {
                    "resources": {rc: {"capacity": c, "used": u} for rc, (c, u) in inv.items()},
                    "traits": [],
                }
        return Candidates.parse({"allocation_requests": areqs, "provider_summaries": summaries})

    async def claim(self, *args: Any, **kw: Any) -> bool:
        raise AssertionError("capacity must not claim")

    async def rollback(self, *args: Any) -> None:
        raise AssertionError("capacity must not roll back")


async def _stall_while(coro: Any) -> tuple[Any, float]:
    """Run ``coro``; the most CPU time (ms) it held the loop between two ticks of a 1 ms
    ticker (CPU time, not wall time: on a shared machine the OS also pauses us)."""
    worst = 0.0
    running = True

    async def tick() -> None:
        nonlocal worst
        last = time.thread_time()
        while running:
            await asyncio.sleep(0.001)
            now = time.thread_time()
            worst = max(worst, now - last)
            last = now

    ticker = asyncio.create_task(tick())
    try:
        result = await coro
    finally:
        running = False
        await ticker
    return result, worst * 1000.0


async def _baseline(cloud: MemoryCloud, config: Config, spec: RequestSpec, sample: int) -> float:
    """Seconds per instance of the sequential decide-and-consume loop (a scratch manager)."""
    mgr = DryRunManager.over(config, cloud, cloud, clock=lambda: NOW)
    hosts, spec = await mgr.traced_hosts(spec)
    offer = Offer(hosts, spec, version=None, claims=True)
    req = mgr.request_run(RequestContext(request_id="req-bench"), offer)
    t0 = time.perf_counter()
    done = 0
    for i in range(sample):
        if not hosts.filter(spec, i):
            break
        base = hosts.pick(spec).chosen_index
        await req.consume(base, spec, f"i-{i}")
        done += 1
    return (time.perf_counter() - t0) / max(1, done)


async def measure(n: int, sample: int) -> dict[str, float]:
    hosts, aggs = make_cloud(n, random.Random(n))
    cloud = MemoryCloud(hosts, aggs)
    gc.collect()
    gc.freeze()  # as the daemon does once its cache is loaded (service.py, freeze_gc)
    config = Config()
    spec = RequestSpec(flavor=FLAVOR, project_id="p", user_id="u")
    out, stall = await _stall_while(capacity(config, cloud, cloud, spec, clock=lambda: NOW))
    per_instance = await _baseline(cloud, config, spec, sample)
    return {
        "hosts": n,
        "total": out.total,
        "rounds": out.rounds,
        "seconds": out.seconds,
        "stall_ms": stall,
        "baseline_s": per_instance * out.total,
    }


async def measure_tiny(n: int) -> list[tuple[int, Any, float]]:
    """Issue #21's request under the default bounds, and under a tenth of the cap."""
    hosts, aggs = make_cloud(n, random.Random(n))
    cloud = MemoryCloud(hosts, aggs)
    gc.collect()
    gc.freeze()
    config = Config()
    o = config.asyncsched
    spec = RequestSpec(flavor=TINY, project_id="p", user_id="u")
    out = []
    for cap in (o.capacity_max_instances // 10, o.capacity_max_instances):
        bounds = Bounds(cap, time.monotonic() + o.admin_dry_run_timeout)
        run = capacity(config, cloud, cloud, spec, clock=lambda: NOW, bounds=bounds)
        result, stall = await _stall_while(run)
        out.append((cap, result, stall))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.bench_capacity")
    parser.add_argument("--hosts", default="1000,10000")
    parser.add_argument("--sample", type=int, default=300)
    parser.add_argument("--tiny", action="store_true", help="issue #21's request, bounded")
    args = parser.parse_args(argv)
    if args.tiny:
        _print_tiny([int(x) for x in args.hosts.split(",")])
        return
    print(
        "hosts   instances  rounds  capacity s  worst loop stall  sequential (extrapolated)  ratio"
    )
    for n in (int(x) for x in args.hosts.split(",")):
        r = asyncio.run(measure(n, args.sample))
        print(
            f"{r['hosts']:<7,} {r['total']:<10,} {r['rounds']:<7} {r['seconds']:<11.2f} "
            f"{r['stall_ms']:<6.1f} ms          {r['baseline_s']:<8.1f} s"
            f"                  {r['baseline_s'] / r['seconds']:.0f}x",
            flush=True,
        )


def _print_tiny(sizes: list[int]) -> None:
    print("hosts   cap      counted  bounded by                 seconds  worst loop stall")
    for n in sizes:
        rows = asyncio.run(measure_tiny(n))
        for cap, r, stall in rows:
            why = (
                "deadline" if r.bounded and "deadline" in r.bounded else "cap" if r.bounded else "-"
            )
            print(
                f"{n:<7,} {cap:<8,} {r.total:<8,} {why:<26} {r.seconds:<8.2f} {stall:.1f} ms",
                flush=True,
            )
        (_, small, _), (_, big, _) = rows
        print(f"        {big.seconds / small.seconds:.1f}x the time for 10x the cap", flush=True)


if __name__ == "__main__":
    main()
