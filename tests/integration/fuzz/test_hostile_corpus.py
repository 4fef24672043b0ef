"""The hostile corpus (issue #21) against the real daemon through the real broker.

Each case of ``tests.support.fuzz.hostile_corpus`` (backslash and quote runs, deep nesting,
wide objects, long strings, lone surrogates, huge numbers, the 65,000-character ``token...``
instance uuid, bad UTF-8, envelope in envelope, a cast...) is published as raw bytes to an
``asyncsched serve`` subprocess of a seeded cloud (real PostgreSQL, real Placement). Every call
must get an oslo failure reply (``ValueError``, "Malformed request: ..."), the cast a logged
rejection; the daemon lives on, answers the ordinary call after it, and leaves nothing on the
queue (every case acked). The loop's hold per case is read from the daemon's own ``looplag``
component. In the normal suite (128 KiB a case) it is compared with what the same run measured
for an ordinary call of the same size and for the idle daemon: at most 5 times the larger,
never against a fixed time (the quadratic scans this guards against took seconds at this size).
``make fuzz`` runs the corpus at 12 MiB (``ASYNCSCHED_CORPUS_BYTES``), where some cases do real
work an ordinary call does not (45,000 integers to convert), prints the table of worst holds and
requires each under the issue's 100 ms. A case over its bound is run up to twice more and its
least hold kept: a hold the case causes comes back, a spike of the shared machine does not.
"""

from __future__ import annotations

import json
import os
import time
import uuid

import pytest

from tests.support.fuzz import LagWatch, Mutant, Wire, benign_call, hostile_corpus
from tests.support.fuzz_calls import own_call, scheduler_queue
from tests.support.serve_process import ServeProcess

pytestmark = pytest.mark.integration

SIZE = int(os.environ.get("ASYNCSCHED_CORPUS_BYTES", str(128 * 1024)))
FULL_SIZE = SIZE >= 4 * 1024 * 1024
HOSTS = 2  # roomy hosts the stack seeds (conftest)
BEAT = 0.1  # the daemon's health-file interval (its looplag samples every 0.25 s)
SETTLE = 0.7  # after a reply: the next two looplag samples have reached the health file
ISSUE_LIMIT = 0.1  # issue #21: no input holds the loop 100 ms or more (make fuzz only)


def _run(wire: Wire, lags: LagWatch, mutant: Mutant) -> float:
    """Publish one message, wait for its answer and the loop samples after it: the hold."""
    mark = lags.mark()
    wire.publish([mutant])
    left = wire.wait_below(0, timeout=120)
    assert left == 0, f"unanswered: {list(wire.pending)}"
    time.sleep(SETTLE)
    return lags.since(mark)


def test_every_hostile_case_is_refused_and_the_loop_keeps_turning(
    daemon: ServeProcess, module_amqp_url: str, module_vhost: str
) -> None:
    health = daemon.conf.parent / "health.json"
    rows: list[tuple[str, int, float, str]] = []
    with Wire(module_amqp_url.replace("rabbit://", "amqp://")) as wire, LagWatch(health) as lags:
        mark = lags.mark()
        time.sleep(4 * SETTLE)
        idle = lags.since(mark)
        baseline = 0.0
        for _ in range(3):
            msg_id = uuid.uuid4().hex
            body = benign_call(wire.reply_q, msg_id, own_call(), SIZE)
            baseline = max(baseline, _run(wire, lags, Mutant(body, msg_id, False)))
            assert msg_id not in wire.failures, wire.failures[msg_id]  # it was served

        def ordinary(msg_id: str) -> bytes:
            return benign_call(wire.reply_q, msg_id, own_call(), SIZE)

        allowance = ISSUE_LIMIT if FULL_SIZE else 5 * max(baseline, idle)
        for case in hostile_corpus(SIZE, wire.reply_q, ordinary):
            hold = _run(wire, lags, Mutant(case.body, case.msg_id, case.cast))
            for _ in range(2):  # again: a hold the case causes comes back, a spike does not
                if hold > allowance:
                    hold = min(hold, _run(wire, lags, Mutant(case.body, case.msg_id, case.cast)))
            if case.msg_id is None:
                answer = "(cast: logged)"
            else:
                failure = json.loads(wire.failures[case.msg_id])
                assert failure["class"] == "ValueError", (case.name, failure)
                assert failure["message"].startswith("Malformed request: "), failure
                answer = failure["message"][len("Malformed request: ") :][:60]
            rows.append((case.name, len(case.body), hold, answer))
            assert daemon.alive(), daemon.stderr()[-4000:]
        # The consumer goes on: an ordinary call after the corpus is still served.
        msg_id = uuid.uuid4().hex
        after = _run(
            wire, lags, Mutant(benign_call(wire.reply_q, msg_id, own_call(), SIZE), msg_id, False)
        )
        assert msg_id not in wire.failures
    print(f"\nFIGURE hostile corpus at {SIZE} bytes a case (worst loop hold, daemon's looplag):")
    print(
        f"  idle {idle * 1000:.1f} ms; ordinary call of that size {baseline * 1000:.1f} ms, "
        f"after the corpus {after * 1000:.1f} ms"
    )
    for name, size, hold, answer in rows:
        print(f"  {name:36} {size:>10} B  {hold * 1000:7.1f} ms  {answer}")
    assert "Rejected a malformed message with no reply address" in daemon.stderr()
    assert scheduler_queue(module_vhost)["messages"] == 0  # every case acked (or rejected)
    slow = [(name, hold) for name, _, hold, _ in rows if hold > allowance]
    assert not slow, f"held the loop over {allowance} s (ordinary {baseline}, idle {idle}): {slow}"
