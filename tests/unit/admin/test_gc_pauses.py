"""The collector's pauses, timed through gc.callbacks: counted by generation, handed to the
metric on the loop (never from inside the collection), and the callback gone after close."""

from __future__ import annotations

import asyncio
import gc

from prometheus_client import CollectorRegistry, generate_latest

from asyncsched.admin.looplag import GCPauses, LoopLagMonitor
from asyncsched.admin.metrics import Metrics


def test_a_full_collection_is_counted_under_generation_2_and_observed_only_on_flush() -> None:
    seen: list[tuple[int, float]] = []
    pauses = GCPauses(lambda g, s: seen.append((g, s)))
    pauses.install()
    try:
        gc.collect()
        gc.collect(0)
    finally:
        pauses.remove()
    assert pauses.counts[2] >= 1 and pauses.counts[0] >= 1
    assert pauses.spent[2] > 0 and pauses.longest >= max(pauses.spent[2] / pauses.counts[2], 0)
    assert 0 < pauses.longest_of[2] <= pauses.spent[2] and max(pauses.longest_of) == pauses.longest
    assert 0 < pauses.longest_cpu  # the longest one's CPU time, taken with it
    assert seen == []  # nothing observed inside the collection
    pauses.flush()
    assert {g for g, _ in seen} >= {0, 2}
    assert all(s >= 0 for _, s in seen)
    pauses.flush()
    assert len(seen) == sum(pauses.counts)  # each pause handed over once
    gc.collect()
    assert sum(pauses.counts) == len(seen)  # removed: no longer called


def test_the_longest_collection_keeps_what_it_freed_and_its_cpu_time() -> None:
    pauses = GCPauses()
    gc.collect()
    gc.disable()  # no collection before ours: it is the only one, hence the longest
    try:
        for _ in range(1000):  # cycles only the collector frees
            cycle: list[object] = []
            cycle.append(cycle)
        del cycle
        pauses.install()
        try:
            gc.collect()
        finally:
            pauses.remove()
    finally:
        gc.enable()
    assert sum(pauses.counts) == 1
    assert pauses.longest_collected >= 1000
    assert 0 < pauses.longest_cpu


async def test_the_monitor_reports_pauses_in_health_and_on_the_metric() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    monitor = LoopLagMonitor(metrics.loop_lag.observe, observe_gc=metrics.gc_paused, interval=0.01)
    callbacks = len(gc.callbacks)
    await monitor.start()
    try:
        gc.collect()
        await asyncio.sleep(0.05)  # a few samples: the pauses flushed to the histogram
        health = monitor.health()
    finally:
        await monitor.close()
    assert len(gc.callbacks) == callbacks
    assert health.gc_collections[2] >= 1 and health.gc_pause_s[2] > 0
    assert health.gc_pause_max_s > 0 and health.gc_pause_longest_s[2] > 0
    text = generate_latest(registry).decode()
    line = next(
        ln
        for ln in text.splitlines()
        if ln.startswith('asyncsched_gc_pause_seconds_count{generation="2"}')
    )
    assert float(line.split()[-1]) >= 1


def test_the_frozen_heap_and_the_keepers_freezes_are_exported() -> None:
    from asyncsched.admin.metrics import HealthCollector
    from asyncsched.common import heap
    from asyncsched.common.health import ServiceHealth

    gc.unfreeze()
    kept: list[list[int]] = [[] for _ in range(10)]
    was = heap.KEEPER.freezes
    heap.KEEPER.enabled = True
    try:
        heap.KEEPER.made(heap.KEEP_AT)
        families = {
            m.name: m for m in HealthCollector(lambda: ServiceHealth("running", {})).collect()
        }
    finally:
        heap.KEEPER.enabled = False
        gc.unfreeze()
    assert families["asyncsched_gc_frozen_objects"].samples[0].value >= len(kept)
    assert families["asyncsched_gc_heap_freezes"].samples[0].value == was + 1
