"""A live call behind calls whose reply queues do not exist, against the same call alone.

oslo.messaging's server retries a reply to a missing queue inline, for the call's timeout (60
s here), holding its intake; asyncsched retries them in the background. Each round starts a
real ``RPCServer`` on the local RabbitMQ, times a ping through the real oslo.messaging client
with nothing in its way (the baseline, the connection already open), publishes ``--returned``
calls whose replies the broker returns, and times the next live ping: the ratio is the cost of
what stands in front of it. ``tests/integration/rpc/test_rpc_hostile_callers.py`` checks the
behaviour without a clock (the live call is answered while every returned reply still waits
in its background retry); the time bound lives here.

    .venv/bin/python -m bench.bench_rpc_returned [--rounds 5] [--returned 40]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from dataclasses import replace

import aio_pika

from asyncsched.rpc.server import RPCServer
from tests.support import broker
from tests.support.decisions import RecordingEvents, RecordingScheduler
from tests.support.oslo_caller import OsloSchedulerClient, raw_ping

#: the live call may take this many times the baseline (the bound the test had)
BOUND = 10.0


async def one_round(vhost: str, returned: int) -> tuple[float, float]:
    """(baseline, behind) seconds of one ping each."""
    url = broker.amqp_url(vhost)
    config = broker.make_config(url, max_concurrent=16)
    config = replace(config, asyncsched=replace(config.asyncsched, drain_timeout=1.0))
    server = RPCServer(config, RecordingScheduler(), RecordingEvents())
    client = OsloSchedulerClient(url, timeout=30, call_monitor_timeout=10)
    try:
        async with server:
            await asyncio.to_thread(client.ping, "open")  # the connection, the reply queue
            t0 = time.monotonic()
            await asyncio.to_thread(client.ping, "alone")
            baseline = time.monotonic() - t0
            conn = await aio_pika.connect(f"amqp://guest:guest@127.0.0.1:5672/{vhost}")
            async with conn:
                exchange = await (await conn.channel()).get_exchange("nova")
                for i in range(returned):
                    body = raw_ping(f"reply_{uuid.uuid4().hex}", f"gone-{i}", timeout_literal="60")
                    await exchange.publish(aio_pika.Message(body), routing_key="scheduler")
            t0 = time.monotonic()
            pong = await asyncio.to_thread(client.ping, "behind")
            behind = time.monotonic() - t0
            assert pong == {"service": "scheduler", "arg": "behind"}, pong
            assert server.health()["replies_pending"] == returned
    finally:
        client.close()
    return baseline, behind


async def main_async(rounds: int, returned: int) -> None:
    ratios = []
    for r in range(rounds):
        with broker.throwaway_vhost("asyncsched-bench-returned") as vhost:
            baseline, behind = await one_round(vhost, returned)
        ratios.append(behind / baseline)
        print(
            f"  round {r + 1}: alone {baseline * 1000:.1f} ms, behind {returned} returned "
            f"replies {behind * 1000:.1f} ms ({behind / baseline:.2f}x)",
            flush=True,
        )
    median = statistics.median(ratios)
    print(
        f"a live call behind {returned} calls to missing reply queues: median {median:.2f}x "
        f"the same call alone, max {max(ratios):.2f}x (bound {BOUND:g}x): "
        f"{'met' if median < BOUND else 'NOT met'}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--returned", type=int, default=40)
    args = ap.parse_args(argv)
    asyncio.run(main_async(args.rounds, args.returned))


if __name__ == "__main__":
    main()
