"""The per-message checks of a select_destinations call, in process, against json.loads.

``bench_rpc`` on a shared 2-core machine follows the load; this times the steps of issue #23's
trace on ``bench_rpc``'s own message in one process, alternating, CPU time, best of repeats:
the inner message's ``json.loads`` (the baseline every ratio is to), the bounds walk the server
runs on every message (``rpc/validation.check_message``), the codec's depth walk of the
RequestSpec (``check_depth``, which the RPC path ran a second time before the one-walk change
and now skips), and decoding the RequestSpec without it. The walks per call before the change
were check_message + check_depth; now check_message alone.

    PYTHONPATH=$PWD .venv/bin/python -m bench.bench_rpc_steps [--rounds 5]

The last line, "server path", is what the RPC server does per select_destinations message
(check_message, then decode the spec as ``rpc/methods`` does); it runs on older trees too (where
the decoder has no ``nesting_checked`` it walks the spec again), so this file can be copied into
another tree's ``bench/`` to compare the two alternately, as ``bench_rpc_cpu``.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import time
import timeit
from collections.abc import Callable
from typing import Any

from asyncsched.objects import codec
from asyncsched.objects.codec.primitives import check_depth
from asyncsched.rpc import validation
from tests.support.oslo_caller import request_spec_primitive


def _best(fn: Callable[[], object], number: int = 500) -> float:
    """Microseconds of CPU per call: the best of 7 repeats of ``number`` calls."""
    return min(timeit.repeat(fn, number=number, repeat=7, timer=time.process_time)) / number * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    spec = request_spec_primitive(num_instances=3)
    inner: dict[str, Any] = {
        "method": "select_destinations",
        "version": "4.5",
        "args": {
            "spec_obj": spec,
            "instance_uuids": [f"00000000-0000-0000-0000-00000000000{i}" for i in range(3)],
            "return_objects": True,
            "return_alternates": True,
        },
    }
    text = json.dumps(inner)
    one_walk = "nesting_checked" in inspect.signature(codec.decode_request_spec).parameters
    decode_kw: dict[str, Any] = {"nesting_checked": True} if one_walk else {}

    def server_path() -> None:
        validation.check_message(inner)
        codec.decode_request_spec(spec, "args.spec_obj", **decode_kw)

    steps: dict[str, Callable[[], object]] = {
        "json.loads (baseline)": lambda: json.loads(text),
        "check_message": lambda: validation.check_message(inner),
        "check_depth(spec)": lambda: check_depth(spec, "args.spec_obj"),
        "decode spec": lambda: codec.decode_request_spec(spec, "args.spec_obj", **decode_kw),
        "server path": server_path,
    }
    got: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, fn in steps.items():
            got[name].append(_best(fn))
    base = statistics.median(got["json.loads (baseline)"])
    print(f"bench_rpc's inner message: {len(text)} bytes; medians of {args.rounds} rounds")
    for name, values in got.items():
        us = statistics.median(values)
        print(f"  {name:30s} {us:8.1f} us CPU   {us / base:5.2f} x json.loads")
    walk = statistics.median(got["check_message"])
    both = walk + statistics.median(got["check_depth(spec)"])
    print(
        f"bounds walks per call: check_message + check_depth {both:.1f} us "
        f"({both / base:.2f} x json.loads), check_message alone {walk:.1f} us ({walk / base:.2f} x)"
    )
    path = statistics.median(got["server path"])
    walks = "one walk" if one_walk else "two walks"
    print(f"server path ({walks}): {path:.1f} us CPU, {path / base:.2f} x json.loads")


if __name__ == "__main__":
    main()
