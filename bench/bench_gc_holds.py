"""The cyclic collector's pauses while the mirror-backed scheduler serves a mix of flavors.

One process per variant, with the daemon's collector set-up (``service.freeze_start_up_heap``:
the loaded heap frozen, thresholds ``DAEMON_GC_THRESHOLDS``) and the daemon's pause timer
(``admin.looplag.GCPauses``), over ``bench_hold_mirror``'s cloud: the real SchedulerManager,
candidates from a real LocalCandidates over a MirrorState of ``--hosts`` hosts. The workload is
``--boots`` one-instance boots of ``--flavors`` sizes in turn, the mirror refreshed every
``--refresh-every`` boots, and every ``--churn`` boots a host of the answer filled (it leaves
every answer) and the one filled before freed (it joins them: the answers are built anew), as
boots and deletes do in a busy cloud. Printed per variant: collections and the longest pause
by generation, all pauses together, the boots' CPU per boot (loop thread, collections
included), RSS at the end and what the heap froze. The variants run in turn, each in its own
process, ``--rounds`` times:

* ``before``: as the parent tree of the keeper had it: only the start-up heap frozen, and the
  allocation requests of 4 request shapes kept (``AREQ_SHAPES`` was 4, fewer than the
  flavors: a dropped shape's answer was built with new ones);
* ``off``: ``AREQ_SHAPES`` as now (``ANSWERS``), the keeper off;
* ``on``: as the daemon runs now: ``common.heap.KEEPER`` on (``service.py``), what large builds
  keep moved out of the collector's reach past ``KEEP_AT`` objects.

    .venv/bin/python -m bench.bench_gc_holds [--hosts 100000] [--boots 120] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import resource
import subprocess
import sys
import time

from asyncsched import service
from asyncsched.admin.looplag import GCPauses
from asyncsched.common import heap
from asyncsched.scheduling.candidates import local
from asyncsched.state.placement_mirror.model import Provider
from bench.bench_hold_mirror import Cloud, filled

VARIANTS = ("before", "off", "on")


async def workload(cloud: Cloud, boots: int, flavors: int, every: int, churn: int) -> float:
    """The boots; returns the loop thread's CPU seconds they took."""
    m, churn_once = cloud.mirror, Churn(cloud)
    began = time.thread_time()
    for i in range(boots):
        if i % every == 0:
            m.refresh()
        if churn and i % churn == churn - 1:
            churn_once()
        await cloud.call(1, i % flavors)
    return time.thread_time() - began


class Churn:
    """Boots fill a host of the answers (it leaves them) while a delete frees the one filled
    before (it joins them): one new state each time."""

    def __init__(self, cloud: Cloud) -> None:
        self.mirror = cloud.mirror
        self.full = 0
        self.was: Provider | None = None

    def __call__(self) -> None:
        m, moved = self.mirror, []
        if self.was is not None:
            m.providers[self.full] = self.was
            moved.append(self.full)
        self.full += 1
        self.was = m.providers[self.full]
        m.providers[self.full] = filled(self.was)
        moved.append(self.full)
        m.state = m.state.with_providers(dict(m.providers), moved)


async def one(variant: str, n: int, boots: int, flavors: int, every: int, churn: int) -> None:
    if variant == "before":
        local.AREQ_SHAPES = 4
    cloud = Cloud(n)
    service.freeze_start_up_heap()
    heap.KEEPER.enabled = variant == "on"
    pauses = GCPauses()
    pauses.install()
    try:
        for f in range(flavors):  # each flavor's first answer and view
            await cloud.call(1, f)
        cpu = await workload(cloud, boots, flavors, every, churn)
    finally:
        pauses.remove()
    frozen = gc.get_freeze_count()
    gc.unfreeze()  # cyclic garbage the frozen heap held (freed by no reference count)
    garbage = gc.collect()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "variant": variant,
                "counts": pauses.counts,
                "longest_ms": round(pauses.longest * 1e3, 1),
                "spent_ms": [round(s * 1e3, 1) for s in pauses.spent],
                "cpu_ms_per_boot": round(cpu * 1e3 / boots, 1),
                "maxrss_mib": round(rss),
                "kept": heap.KEEPER.freezes,
                "frozen": frozen,
                "garbage": garbage,
            }
        )
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=100_000)
    ap.add_argument("--boots", type=int, default=120)
    ap.add_argument("--flavors", type=int, default=6)
    ap.add_argument("--refresh-every", type=int, default=4)
    ap.add_argument("--churn", type=int, default=10, help="boots between a leave and a join")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    shape = (args.hosts, args.boots, args.flavors, args.refresh_every, args.churn)
    if args.variant:
        asyncio.run(one(args.variant, *shape))
        return
    print(
        f"{args.hosts} hosts, {args.boots} boots of {args.flavors} flavors in turn, "
        f"a refresh every {args.refresh_every}, a leave and a join every {args.churn}"
    )
    for r in range(args.rounds):
        for v in VARIANTS:
            cmd = [sys.executable, "-m", "bench.bench_gc_holds", "--variant", v]
            cmd += [
                f"--{k}={a}"
                for k, a in zip(
                    ("hosts", "boots", "flavors", "refresh-every", "churn"), shape, strict=True
                )
            ]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            print(
                f"round {r + 1} {v:6}: collections by generation {got['counts']}, longest "
                f"{got['longest_ms']} ms, in all {got['spent_ms']} ms; CPU "
                f"{got['cpu_ms_per_boot']} ms a boot; max RSS {got['maxrss_mib']} MiB; "
                f"kept {got['kept']} times, {got['frozen']} objects frozen, "
                f"{got['garbage']} cyclic garbage among them at the end"
            )


if __name__ == "__main__":
    main()
