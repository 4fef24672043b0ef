"""Decision-path benchmark: filter + weigh + pick (no I/O) at 1k and 10k candidate hosts.

Default filters, all 13 weighers. Prints p50/p99 of the fast engine next to the per-host-object
reference implementation (same semantics) measured in the same run, and the ratio.

    .venv/bin/python -m bench.bench_scheduling [--hosts 1000,10000] [--runs 300]
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Callable

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.state.host_state import HostState
from bench import reference_scheduler as reference
from bench.synthetic_cloud import NOW, make_cloud, pipeline


def _percentiles(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return statistics.median(s), s[min(len(s) - 1, int(len(s) * 0.99))]


def _time(fn: Callable[[], object], runs: int) -> list[float]:
    out: list[float] = []
    for _ in range(3):
        fn()
    gc.collect()
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1000.0)
    return out


def measure(n: int, runs: int, *, overrides: bool = False) -> dict[str, float]:
    """p50/p99 (ms) of both paths on an n-host synthetic cloud."""
    config = Config()
    filters, weighers = pipeline(config)
    spec = RequestSpec(flavor=Flavor(memory_mb=2048, vcpus=2, root_gb=20), instance_uuid="i-1")
    states, aggs = make_cloud(n, random.Random(n), overrides=overrides)
    engine = DecisionEngine(config, filters, weighers, clock=lambda: NOW)
    engine.set_aggregates(aggs)

    def fast() -> int:
        req = engine.start(states)
        req.filter(spec, 0)
        return req.pick(spec).chosen_index

    def slow() -> str:
        return reference.decide(config, filters, weighers, states, spec)[0].state.uuid

    # both must agree before anything is timed
    assert states[fast()].uuid == slow(), "fast and reference paths disagree"
    f50, f99 = _percentiles(_time(fast, runs))
    s50, s99 = _percentiles(_time(slow, max(20, runs // 10)))
    return {"hosts": n, "fast_p50": f50, "fast_p99": f99, "ref_p50": s50, "ref_p99": s99}


def measure_multi_create(n_hosts: int, instances: int) -> tuple[float, float]:
    """ms for a whole multi-create decision loop (filter+weigh+pick+consume per instance)."""
    config = Config()
    filters, weighers = pipeline(config)
    spec = RequestSpec(flavor=Flavor(memory_mb=2048, vcpus=2, root_gb=20))

    def consume(h: HostState) -> None:
        h.free_ram_mb -= 2048
        h.free_disk_mb -= 20 * 1024
        h.vcpus_used += 2
        h.num_instances += 1
        h.num_io_ops += 1
        h.touch()

    states, aggs = make_cloud(n_hosts, random.Random(7))
    engine = DecisionEngine(config, filters, weighers, clock=lambda: NOW)
    engine.set_aggregates(aggs)
    t0 = time.perf_counter()
    req = engine.start(states)
    for i in range(instances):
        req.filter(spec, i)
        h = states[req.pick(spec).chosen_index]
        consume(h)
        engine.refresh(h)
    fast = (time.perf_counter() - t0) * 1000.0

    states, _ = make_cloud(n_hosts, random.Random(7))
    t0 = time.perf_counter()
    hosts = [HostCandidate(s) for s in states]
    for i in range(instances):
        hosts = reference.filter_hosts(filters, hosts, spec, i)
        weights = reference.weigh_hosts(weighers, hosts, spec)
        chosen = reference.sort_and_pick(config, hosts, weights, random.Random())[0]
        consume(chosen.state)
    slow = (time.perf_counter() - t0) * 1000.0
    return fast, slow


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", default="1000,10000")
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.hosts.split(",")]
    print("decision path (filter+weigh+pick), default filters + all weighers, one core")
    head = ("hosts", "fast p50", "fast p99", "ref p50", "ref p99", "p99 x")
    print(f"{head[0]:>7} " + " ".join(f"{h:>10}" for h in head[1:5]) + f" {head[5]:>7}")
    rows = [(measure(n, args.runs), "") for n in sizes]
    rows += [
        (measure(n, args.runs, overrides=True), " (aggregate multiplier override)") for n in sizes
    ]
    for r, note in rows:
        print(
            f"{r['hosts']:>7} {r['fast_p50']:>8.3f}ms {r['fast_p99']:>8.3f}ms "
            f"{r['ref_p50']:>8.3f}ms {r['ref_p99']:>8.3f}ms "
            f"{r['ref_p99'] / r['fast_p99']:>6.1f}x{note}"
        )
    fast, slow = measure_multi_create(1000, 100)
    print(
        f"multi-create of 100 instances on 1000 hosts (decide+consume loop): "
        f"fast {fast:.1f}ms, reference {slow:.1f}ms, {slow / fast:.1f}x"
    )


if __name__ == "__main__":
    main()
