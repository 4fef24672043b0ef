"""Property-based fuzzing of the real daemon through the real broker.

Hypothesis mutates nova's captured ``select_destinations`` call, the RequestSpec primitive and
the fanout casts (tests/support/fuzz), and the raw bytes go through RabbitMQ to an ``asyncsched
serve`` subprocess of a seeded cloud (real PostgreSQL, real Placement). Every call whose
envelope still names our reply queue and message id must be answered, with a result or an
oslo failure, and only once; the daemon must not crash; its loop must not stall over 1 s (its
``looplag`` component times a 0.25 s timer: lateness is a stall; the gaps between its health
file's writes, which also wait for the disk, are reported beside it); RSS stays flat.
Replies to ids we did not expect (a mutated ``_msg_id``) are counted, not failures.

CI runs ``ASYNCSCHED_FUZZ_EXAMPLES`` (default 300) examples of 8 messages each; ``make fuzz``
runs 12,500 (100,000 messages).
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.chaos import HealthBeat
from tests.support.fuzz import ENVELOPE_BREAKS, Mutation, Wire, build, mutations, seeds
from tests.support.fuzz_calls import own_call, scheduler_queue
from tests.support.serve_process import ServeProcess

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("ASYNCSCHED_FUZZ_EXAMPLES", "300"))
BATCH = 8
WINDOW = 48
STALL_LIMIT = 1.0  # seconds, on a quiet machine (scaled by the run's own beat below)
HOSTS = 4  # roomy hosts the stack seeds (conftest)
BEAT = 0.25  # the daemon's health-file interval: its loop's heartbeat
RSS_GROWTH_LIMIT_KB = 64 * 1024


def around_worst_gap(daemon: ServeProcess, beat: HealthBeat) -> str:
    """The daemon's log lines of the second before the worst gap began, to name its call."""
    i = max(range(len(beat.gaps)), key=beat.gaps.__getitem__)
    start = time.strftime("%H:%M:%S", time.localtime(beat.gap_end[i] - beat.gaps[i] - 1))
    end = time.strftime("%H:%M:%S", time.localtime(beat.gap_end[i] + 1))
    lines = [ln for ln in daemon.stderr().splitlines() if start <= ln[11:19] <= end]
    return "\n".join(lines[-60:])


def test_fuzzed_calls_and_casts_are_survived_and_answered(
    daemon: ServeProcess, module_amqp_url: str, module_vhost: str
) -> None:
    calls, casts = seeds(own_call())
    sent = 0
    with (
        Wire(module_amqp_url.replace("rabbit://", "amqp://")) as wire,
        HealthBeat(daemon.conf.parent / "health.json", BEAT, daemon.pid) as beat,
    ):
        rss_start = 0

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(
            batch=st.lists(
                st.tuples(
                    st.booleans(),  # a cast?
                    st.integers(min_value=0, max_value=10),  # which seed
                    st.lists(mutations, min_size=1, max_size=3),
                    st.one_of(st.none(), st.none(), st.none(), st.sampled_from(ENVELOPE_BREAKS)),
                ),
                min_size=BATCH,
                max_size=BATCH,
            )
        )
        def one_batch(batch: list[tuple[bool, int, list[Mutation], str | None]]) -> None:
            nonlocal rss_start, sent
            mutants = []
            for is_cast, which, muts, envelope in batch:
                cast = is_cast and which % 4 == 0  # about one in eight is a cast
                seed = casts[which % len(casts)] if cast else calls[which % len(calls)]
                mutants.append(build(seed, muts, wire.reply_q, envelope, cast))
            wire.publish(mutants)
            sent += len(mutants)
            # Keep the daemon busy, not flooded: at most WINDOW answerable calls in flight.
            left = wire.wait_below(WINDOW, timeout=60)
            assert left <= WINDOW, f"{left} calls unanswered for 60 s"
            if not rss_start:
                rss_start = daemon.rss_kb()
            assert daemon.alive(), daemon.stderr()[-4000:]

        t0 = time.monotonic()
        one_batch()
        missing = wire.wait_below(0, timeout=120)
        took = time.monotonic() - t0
        rss_end = daemon.rss_kb()
    # A call whose reply queue a mutant broke is held while its reply is retried (oslo's
    # kombu_missing_consumer_retry_timeout, 60 s), then acked: the queue must drain.
    t_end = time.monotonic()
    drained = scheduler_queue(module_vhost)
    while drained["messages"] and time.monotonic() - t_end < 90:
        time.sleep(1)
        drained = scheduler_queue(module_vhost)
    drain_s = time.monotonic() - t_end
    print(
        f"FIGURE fuzz: {EXAMPLES} examples, {sent} messages ({wire.expected} answerable "
        f"calls) in {took:.0f} s: answered {dict(wire.answered)}, {missing} unanswered, "
        f"{wire.duplicates} answered twice, {wire.others} replies to mutated ids; "
        f"{beat.summary()}; RSS {rss_start // 1024} -> {rss_end // 1024} MiB; scheduler "
        f"queue empty {drain_s:.0f} s after the last answer",
        flush=True,
    )
    assert daemon.alive(), daemon.stderr()[-4000:]
    assert missing == 0, list(wire.pending.values())[:3]
    assert wire.duplicates == 0
    assert drained["messages"] == 0, drained
    assert len(beat.gaps) > took / BEAT / 4, beat.summary()  # the beat was really watched
    loop_max = beat.loop_lag_max()
    assert loop_max is not None, "the daemon's health file has no looplag"
    # STALL_LIMIT holds on a quiet machine, where the beat's typical gap is BEAT; a loaded one
    # stretches every gap, so the bar scales with the typical gap measured in this run.
    limit = STALL_LIMIT * max(1.0, statistics.median(beat.gaps) / BEAT)
    assert loop_max < limit, f"{beat.summary()}\n{around_worst_gap(daemon, beat)}"
    assert rss_end - rss_start < RSS_GROWTH_LIMIT_KB, (rss_start, rss_end)
