"""Placement latency at 1,000 providers, asyncsched's client against a nova-style baseline.

Starts the real Placement (gunicorn, 2 workers, PostgreSQL), seeds N compute-node providers
and measures, in the same run:

* ``GET /allocation_candidates`` (nova 34's query for a 2 vCPU / 2 GB / 20 GB flavor,
  limit=1000): asyncsched's PlacementClient (aiohttp keep-alive, one-pass index) vs a plain
  synchronous keep-alive client doing what nova does with the answer (json + index + a deep copy
  of each host's candidates);
* ``PUT /allocations`` (one claim): asyncsched (one PUT) vs nova's claim_resources (GET then PUT);
* a 10-instance multi-create's claims: nova's sequential loop vs ClaimBatch (concurrency 8).

    .venv/bin/python -m bench.bench_placement [--providers 1000] [--runs 15]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import http.client
import json
import statistics
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, RequestContext, RequestSpec
from asyncsched.placement.claims import ClaimBatch
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.prefilters import run_prefilters
from asyncsched.placement.query import build_resource_request
from tests.support.placement_server import PlacementServer


class SyncClient:
    """What a requests/keystoneauth session does: sequential, blocking, keep-alive."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port)
        self.headers = {
            "x-auth-token": "admin",
            "OpenStack-API-Version": "placement 1.36",
            "Accept": "application/json",
        }

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        headers = dict(self.headers)
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        self.conn.request(method, path, body=data, headers=headers)
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)

    def candidates(self, qs: str) -> dict[str, list[Any]]:
        status, body = self.call("GET", f"/allocation_candidates?{qs}")
        assert status == 200, status
        by_rp: defaultdict[str, list[Any]] = defaultdict(list)
        for ar in body["allocation_requests"]:
            for rp in ar["allocations"]:
                by_rp[rp].append(ar)
        # nova: host.allocation_candidates = deepcopy(alloc_reqs_by_rp_uuid[host.uuid])
        return {rp: copy.deepcopy(by_rp[rp]) for rp in body["provider_summaries"]}

    def claim(self, consumer: str, ar: dict[str, Any]) -> bool:
        """nova's claim_resources: GET the consumer, then PUT (deep-copied payload)."""
        self.call("GET", f"/allocations/{consumer}")
        payload = copy.deepcopy(ar)
        payload.update(project_id="p", user_id="u", consumer_generation=None)
        status, _ = self.call("PUT", f"/allocations/{consumer}", payload)
        return status == 204

    def close(self) -> None:
        self.conn.close()


def _line(what: str, ours: list[float], label: str, base: list[float]) -> str:
    o, b = _median_ms(ours), _median_ms(base)
    return f"{what:<27} asyncsched {o:7.1f} ms   {label:<16} {b:7.1f} ms   ratio {b / o:.2f}x"


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _timed(fn: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


async def _run(providers: int, runs: int) -> None:
    server = PlacementServer(workers=2)
    server.start()
    try:
        t0 = time.perf_counter()
        async with server.seeder(concurrency=32) as s:
            rps = await s.compute_nodes(providers, vcpus=64, memory_mb=262144, disk_gb=10000)
        seed_s = time.perf_counter() - t0
        print(f"seeded {providers} providers in {seed_s:.1f} s ({providers / seed_s:.0f}/s)")

        config = Config()
        spec = run_prefilters(
            RequestContext(),
            RequestSpec(flavor=Flavor(vcpus=2, memory_mb=2048, root_gb=20)),
            config,
            (),
        )
        request = build_resource_request(spec, config)
        qs = request.to_querystring()
        sync = SyncClient(server.url)
        async with PlacementClient(server.options) as client:
            n = len((await client.get_allocation_candidates(request)).provider_summaries)
            print(f"query: {qs}  -> {n} candidates")

            ours: list[float] = []
            for _ in range(runs):
                t = time.perf_counter()
                await client.get_allocation_candidates(request)
                ours.append(time.perf_counter() - t)
            base = _timed(lambda: sync.candidates(qs), runs)
            print(_line("GET /allocation_candidates", ours, "nova-style sync", base))

            cands = await client.get_allocation_candidates(request)
            ar_of = [cands.alloc_reqs_by_rp_uuid[rp][0] for rp in rps[:50]]
            consumers: list[str] = []
            ours = []
            for ar in ar_of:
                c = str(uuid.uuid4())
                t = time.perf_counter()
                assert await client.claim(c, ar, project_id="p", user_id="u")
                ours.append(time.perf_counter() - t)
                consumers.append(c)
            base = []
            for ar in ar_of:
                c = str(uuid.uuid4())
                t = time.perf_counter()
                assert sync.claim(c, ar)
                base.append(time.perf_counter() - t)
                consumers.append(c)
            print(_line("PUT /allocations (1 claim)", ours, "nova GET+PUT", base))
            await client.rollback(consumers)

            seq_runs, batch_runs = [], []
            for r in range(5):
                hosts = rps[100 + r * 20 : 110 + r * 20]
                ars = [cands.alloc_reqs_by_rp_uuid[h][0] for h in hosts]
                seq = [str(uuid.uuid4()) for _ in ars]
                t = time.perf_counter()
                for c, ar in zip(seq, ars, strict=True):
                    assert sync.claim(c, ar)
                seq_runs.append(time.perf_counter() - t)
                hosts = rps[110 + r * 20 : 120 + r * 20]
                ars = [cands.alloc_reqs_by_rp_uuid[h][0] for h in hosts]
                batch = ClaimBatch(client, concurrency=8, project_id="p", user_id="u")
                t = time.perf_counter()
                for ar in ars:
                    batch.submit(str(uuid.uuid4()), ar)
                results = await batch.wait()
                batch_runs.append(time.perf_counter() - t)
                assert all(res.ok for res in results.values())
                await batch.rollback()
                await client.rollback(seq)
            print(_line("10-instance claims", batch_runs, "nova sequential", seq_runs))
        sync.close()
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--providers", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    asyncio.run(_run(args.providers, args.runs))


if __name__ == "__main__":
    main()
