"""The loop step of a 500,000-key message against a benign message of the same size.

An argument object of 500,000 small keys held the server's loop 2.5 s; the server now counts
a body's values before parsing it and refuses it there. Each round delivers both messages
through the RPC server in process (``tests/support/rpc_fakes``: the real server's read and
reply path, a fake broker), each once to warm its memory, then measured: the longest step
between two loop turns, loop-thread CPU (``tests/support/loop_gap``). Rounds interleave the
two, and each message's shortest of the rounds is compared, so a burst of load during one
measurement weighs on neither. ``tests/unit/rpc/test_rpc_big_messages.py`` checks without a
clock that the wide message never reaches the JSON parser; the time bound lives here.

    PYTHONPATH=$PWD .venv/bin/python -m bench.bench_rpc_wide [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio

from tests.support.loop_gap import max_gap_while
from tests.support.rpc_fakes import (
    Events,
    Journal,
    Scheduler,
    _deliver,
    _server,
    benign_message,
    wide_message,
)

#: the wide message's step may be this many times the benign one's, plus SLACK seconds (the
#: bound the unit test had)
BOUND = 3.0
SLACK = 0.005


async def _step(body: bytes) -> float:
    """The longest loop step, seconds of loop-thread CPU, of one delivery of ``body``."""
    journal = Journal()
    server = _server(Scheduler(), Events(), journal)
    await _deliver(server, journal, body)  # warm: the first run pays for first-touch memory
    journal.events.clear()
    return (await max_gap_while(_deliver(server, journal, body))).longest


async def main_async(rounds: int) -> None:
    wide = wide_message()
    benign = benign_message(wide)
    wides, benigns = [], []
    for r in range(rounds):
        benigns.append(await _step(benign))
        wides.append(await _step(wide))
        print(
            f"  round {r + 1}: benign {benigns[-1] * 1000:.1f} ms, "
            f"500,000 keys {wides[-1] * 1000:.1f} ms",
            flush=True,
        )
    b, w = min(benigns), min(wides)
    bound = BOUND * b + SLACK
    print(
        f"longest loop step of a {len(wide):,}-byte message, shortest of {rounds} rounds: "
        f"500,000 keys {w * 1000:.1f} ms, benign {b * 1000:.1f} ms ({w / b:.2f}x; bound "
        f"{BOUND:g}x + {SLACK * 1000:g} ms = {bound * 1000:.1f} ms): "
        f"{'met' if w < bound else 'NOT met'}"
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    asyncio.run(main_async(args.rounds))


if __name__ == "__main__":
    main()
