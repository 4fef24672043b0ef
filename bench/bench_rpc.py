"""RPC wire cost: asyncsched's aio-pika server vs a real oslo.messaging RPC server.

Both serve select_destinations for the same caller (the real oslo.messaging RPCClient, built as
nova's scheduler rpcapi builds it) with a decision that takes no time, so what is measured is
the wire: RabbitMQ round trip, envelope, (de)serialisation, reply publishing. The baseline is
oslo's own server (threading executor, acks before dispatch, no publisher-confirm wait on the
ack); it returns a pre-built result without decoding the RequestSpec, while ours decodes the
whole spec into typed values and confirms the reply before acking. Each runs in its own
throwaway vhost, in the same run, on the same broker; the callers run in a separate process
(so they do not share the server's GIL), and the two servers are measured alternately for
``--rounds`` rounds; medians are printed. On a shared 2-core machine expect ±30 % noise.

    .venv/bin/python -m bench.bench_rpc [--calls 300] [--threads 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import oslo_messaging as messaging
from oslo_config import cfg

from asyncsched.objects import codec
from asyncsched.objects.models import RequestContext, RequestSpec, Selection
from asyncsched.rpc.server import RPCServer
from tests.support.broker import amqp_url, make_config, throwaway_vhost
from tests.support.decisions import RecordingEvents
from tests.support.oslo_caller import OsloSchedulerClient, request_spec_primitive

SELECTIONS = [
    [
        Selection(
            compute_node_uuid=str(uuid.uuid4()),
            service_host=f"cn-{i}",
            nodename=f"cn-{i}",
            cell_uuid=str(uuid.uuid4()),
            allocation_request='{"allocations": {}, "mappings": {}}',
            allocation_request_version="1.36",
            availability_zone="nova",
        )
        for i in range(3)
    ]
]
RESULT = codec.encode_selections(SELECTIONS, return_objects=True)


class InstantScheduler:
    async def select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        return SELECTIONS


class OsloEndpoint:
    target = messaging.Target(version="4.5")

    def select_destinations(self, ctxt: Any, **kwargs: Any) -> Any:
        return RESULT


@contextmanager
def vhost() -> Iterator[str]:
    with throwaway_vhost("bench-rpc") as name:
        yield amqp_url(name)


def measure_in_child(url: str, calls: int, threads: int) -> dict[str, float]:
    client = OsloSchedulerClient(url, timeout=60, call_monitor_timeout=30)
    try:
        return measure(client, calls, threads)
    finally:
        client.close()


def measure(client: OsloSchedulerClient, calls: int, threads: int) -> dict[str, float]:
    spec = request_spec_primitive(num_instances=3)
    uuids = [str(uuid.uuid4()) for _ in range(3)]

    def one() -> float:
        t0 = time.perf_counter()
        client.select_destinations(spec, uuids)
        return time.perf_counter() - t0

    for _ in range(20):  # warm up the reply queue and connection pools
        one()
    lat = sorted(one() for _ in range(calls))
    with ThreadPoolExecutor(threads) as pool:
        t0 = time.perf_counter()
        list(pool.map(lambda _: one(), range(calls)))
        elapsed = time.perf_counter() - t0
    return {
        "p50_ms": statistics.median(lat) * 1000,
        "p95_ms": lat[int(len(lat) * 0.95)] * 1000,
        "throughput": calls / elapsed,
    }


async def run_ours(url: str, calls: int, threads: int, callers: Executor) -> dict[str, float]:
    config = make_config(url)
    async with RPCServer(config, InstantScheduler(), RecordingEvents()):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(callers, measure_in_child, url, calls, threads)


def run_oslo(url: str, calls: int, threads: int, callers: Executor) -> dict[str, float]:
    transport = messaging.get_rpc_transport(cfg.CONF, url=url)
    target = messaging.Target(topic="scheduler", server="bench", exchange="nova")
    server = messaging.get_rpc_server(transport, target, [OsloEndpoint()], executor="threading")
    server.start()
    try:
        return callers.submit(measure_in_child, url, calls, threads).result()
    finally:
        server.stop()
        server.wait()
        transport.cleanup()


def codec_cost(runs: int = 2000) -> tuple[float, float]:
    spec = request_spec_primitive(num_instances=3)
    t0 = time.perf_counter()
    for _ in range(runs):
        codec.decode_request_spec(spec)
    decode = (time.perf_counter() - t0) / runs
    t0 = time.perf_counter()
    for _ in range(runs):
        codec.encode_selections(SELECTIONS, return_objects=True)
    encode = (time.perf_counter() - t0) / runs
    return decode * 1e6, encode * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    base_runs: list[dict[str, float]] = []
    our_runs: list[dict[str, float]] = []
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as callers:
        for _ in range(args.rounds):
            with vhost() as url:
                base_runs.append(run_oslo(url, args.calls, args.threads, callers))
            with vhost() as url:
                our_runs.append(asyncio.run(run_ours(url, args.calls, args.threads, callers)))
    base = {k: statistics.median(r[k] for r in base_runs) for k in base_runs[0]}
    ours = {k: statistics.median(r[k] for r in our_runs) for k in our_runs[0]}
    decode_us, encode_us = codec_cost()
    print(
        f"select_destinations over RabbitMQ, {args.calls} calls x {args.rounds} rounds (median),"
        " oslo.messaging caller in its own process"
    )
    print(f"{'':24}{'oslo server':>14}{'asyncsched':>14}{'ratio':>10}")
    for key, label in (("p50_ms", "p50 latency (ms)"), ("p95_ms", "p95 latency (ms)")):
        print(f"{label:24}{base[key]:14.2f}{ours[key]:14.2f}{ours[key] / base[key]:10.2f}")
    print(
        f"{f'throughput, {args.threads} callers':24}{base['throughput']:14.0f}"
        f"{ours['throughput']:14.0f}{ours['throughput'] / base['throughput']:10.2f}  (calls/s)"
    )
    print(f"codec: decode RequestSpec {decode_us:.0f} us, encode 3 Selections {encode_us:.0f} us")


if __name__ == "__main__":
    main()
