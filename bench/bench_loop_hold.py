"""The event loop's longest hold during one big select_destinations call, in both reply forms.

The whole server path of one call runs in this process, without a broker (a fake channel takes
the reply): the body is read and decoded, the call validated, the real SchedulerManager decides
over an in-memory cloud whose Placement answers at once, and the reply is encoded and escaped
into its envelope (``tests/support/big_call.py``). A 1 ms ticker records the longest step
between two of its turns, in the loop thread's CPU time with the collector paused
(``tests/support/loop_gap.py``: another process running, or a collection of the whole heap,
is not blamed on the code). The cache is the tests' FakeCache, whose ``release_many`` gives
the loop turns as the daemon's HostStateCache does.

Forms (issue #24: no hold of 100 ms or more in any call up to ``max_instances_per_request``):

* ``objects``: instance uuids, claims, Selection objects with alternates (nova 34's call);
* ``legacy``: no instance uuids, ``return_objects=False`` (the old host-dict reply; no claims,
  the consumption is request-local and released before the reply).

The baseline printed beside each hold is the call's whole CPU time in the same run: a call
that never yielded would hold the loop for all of it.

    .venv/bin/python -m bench.bench_loop_hold [--instances 1000,5000,10000] [--hosts 100]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from asyncsched.conf.options import AsyncschedOptions
from tests.support.big_call import FORMS, BigCallServer, call_body, roomy_cloud
from tests.support.loop_gap import max_gap_while
from tests.support.sched_fakes import FakeCache


async def hold_of(hosts_n: int, form: str, num: int) -> tuple[float, float, int]:
    """(longest step, whole call, loop turns), CPU seconds, of one call's server path."""
    hosts = roomy_cloud(hosts_n)
    big = BigCallServer(FakeCache(hosts), hosts)
    body = call_body(form, num)
    steps = await max_gap_while(big.serve(body))
    reply = big.last_reply()
    assert reply.get("failure") is None, reply.get("failure")
    assert len(reply["result"]) == num
    return steps.longest, steps.total, steps.ticks


async def measure(instances: list[int], hosts_n: int) -> None:
    print(f"{hosts_n} hosts; longest loop hold of one call and the call itself, CPU ms")
    print(
        f"{'form':8} {'instances':>9} {'hold ms':>9} {'call ms':>9} {'hold/call':>9} {'turns':>6}"
    )
    worst = dict.fromkeys(FORMS, 0.0)
    for num in instances:
        for form in FORMS:
            gap, total, turns = await hold_of(hosts_n, form, num)
            worst[form] = max(worst[form], gap)
            print(
                f"{form:8} {num:>9} {gap * 1e3:>9.1f} {total * 1e3:>9.1f} "
                f"{gap / total:>9.3f} {turns:>6}"
            )
    for form in FORMS:
        print(f"worst hold, {form}: {worst[form] * 1e3:.1f} ms")


def main(argv: list[str] | None = None) -> None:
    most = AsyncschedOptions().max_instances_per_request
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--instances", default=f"1000,5000,{most}")
    ap.add_argument("--hosts", type=int, default=100)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    asyncio.run(measure([int(x) for x in args.instances.split(",")], args.hosts))
    print(f"({time.perf_counter() - t0:.0f} s wall)")


if __name__ == "__main__":
    main()
