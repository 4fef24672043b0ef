"""What the overcommit guard costs a multi-create's claims, against the real Placement.

Starts Placement (gunicorn, 2 workers, PostgreSQL), seeds roomy compute-node providers and
times a 10-instance ClaimBatch (concurrency 8, one claim per provider) with the guard off and
on, alternating, then rolls each batch back.

    .venv/bin/python -m bench.bench_guard [--runs 15] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

from asyncsched.placement.claims import ClaimBatch
from asyncsched.placement.client import PlacementClient
from tests.support.placement_server import PlacementServer


async def batch_ms(client: PlacementClient, providers: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        batch = ClaimBatch(client, concurrency=8, project_id="p", user_id="u")
        t0 = time.perf_counter()
        for rp in providers:
            ar = {"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 64}}}}
            batch.submit(str(uuid.uuid4()), ar)
        results = await batch.wait()
        times.append(time.perf_counter() - t0)
        if not all(r.ok for r in results.values()):
            raise SystemExit("a claim failed: the numbers would mean nothing")
        await batch.rollback()
    return statistics.median(times) * 1000


async def main(runs: int, rounds: int) -> None:
    with PlacementServer(workers=2) as server:
        async with server.seeder() as s:
            providers = await s.compute_nodes(10, vcpus=10000, memory_mb=10**7, disk_gb=10**6)
        for _ in range(rounds):
            for guard in (False, True):
                async with PlacementClient(server.options, overcommit_guard=guard) as client:
                    ms = await batch_ms(client, providers, runs)
                print(f"guard {'on ' if guard else 'off'}: 10-claim batch, median {ms:.0f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    asyncio.run(main(args.runs, args.rounds))
