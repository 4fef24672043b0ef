"""CPU the asyncsched RPC server spends per call, for comparing two trees (issue #23).

Wall-clock latency on a shared machine follows the load; the server process's CPU time per
call much less so. This runs ``bench_rpc``'s own server and caller (the real oslo.messaging
RPCClient in a child process, RabbitMQ in a throwaway vhost) for ``--rounds`` rounds and
prints the server's process CPU per call of each round, then the median. Point PYTHONPATH at
each tree in turn and alternate, several times each, e.g. (docs/structure.md):

    for i in 1 2 3; do for tree in /work/wt/fa3f550 $PWD; do
      (cd $tree && PYTHONPATH=$tree .venv/bin/python -m bench.bench_rpc_cpu --rounds 2)
    done; done

It only imports what ``bench_rpc`` has offered since fa3f550 (``vhost``, ``run_ours``), so it
can be copied into an older tree's ``bench/`` to measure it the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

from bench import bench_rpc

WARM_UP = 20  # calls measure() makes before it times anything


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    calls = WARM_UP + 2 * args.calls  # the latency pass, then the throughput pass
    per_call: list[float] = []
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as callers:
        for i in range(args.rounds):
            with bench_rpc.vhost() as url:
                c0 = time.process_time()
                res = asyncio.run(bench_rpc.run_ours(url, args.calls, args.threads, callers))
                per_call.append((time.process_time() - c0) * 1000 / calls)
            print(
                f"round {i}: server CPU {per_call[-1]:.3f} ms/call "
                f"(p50 {res['p50_ms']:.2f} ms, {res['throughput']:.0f} calls/s)",
                flush=True,
            )
    print(f"median server CPU {statistics.median(per_call):.3f} ms/call over {args.rounds} rounds")


if __name__ == "__main__":
    main()
