"""BrokerLink's reconnect schedule, without a broker: at once after a loss, then fast retries."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import aio_pika
import aiormq.exceptions
import pytest

from asyncsched.common.backoff import Backoff
from asyncsched.conf.options import OsloMessagingRabbitOptions
from asyncsched.conf.transport_url import parse_transport_url
from asyncsched.rpc import broker
from asyncsched.rpc.broker import BrokerLink
from asyncsched.rpc.stats import RPCCounters
from asyncsched.rpc.topology import build_topology
from tests.support.net import free_port


class ScriptedLink(BrokerLink):
    """``_connect`` follows a script of outcomes; ``_sleep`` only records the delay."""

    def __init__(self, script: list[BaseException | None], **kw: Any) -> None:
        rabbit = OsloMessagingRabbitOptions()
        super().__init__(
            rabbit,
            parse_transport_url("rabbit://u:p@h1:5672,u:p@h2:5673/v"),
            build_topology(rabbit, control_exchange="nova", topic="scheduler", server="h"),
            1,
            self._never,
            connection_name="test",
            stats=RPCCounters(),
            rng=random.Random(7),
            **kw,
        )
        self.script = script
        self.hosts: list[str] = []
        self.sleeps: list[float] = []
        self.done = asyncio.Event()

    @staticmethod
    async def _never(*_: Any) -> None:
        raise AssertionError("no deliveries here")

    async def _connect(self, host: Any) -> None:
        self.hosts.append(host.host)
        if not self.script:
            self.done.set()
            await asyncio.Event().wait()
        outcome = self.script.pop(0)
        if outcome is not None:
            raise outcome
        self._lost = asyncio.Event()
        self._lost.set()  # connected, then lost at once

    async def _sleep(self, delay: float) -> None:
        self.sleeps.append(delay)

    async def _teardown(self) -> None:
        pass


async def _run(link: ScriptedLink) -> None:
    task = asyncio.create_task(link._run())
    async with asyncio.timeout(5):
        await link.done.wait()
    task.cancel()


async def test_failed_attempts_back_off_fast_and_alternate_brokers() -> None:
    down = ConnectionRefusedError("refused")
    link = ScriptedLink([down, down, down, down, down])
    await _run(link)
    assert link.hosts == ["h1", "h2", "h1", "h2", "h1", "h2"]
    caps = [0.1, 0.2, 0.4, 0.5, 0.5]
    assert len(link.sleeps) == 5
    assert all(c * 0.8 <= s <= c for s, c in zip(link.sleeps, caps, strict=True))


async def test_a_lost_connection_is_retried_at_once_on_the_same_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(broker, "STABLE_AFTER", 0.0)  # every connection counts as stable
    link = ScriptedLink([None, None])
    await _run(link)
    assert link.sleeps == [] and link.hosts == ["h1", "h1", "h1"]
    assert link._stats.reconnects == 2


async def test_a_connection_lost_right_away_backs_off_instead_of_spinning() -> None:
    link = ScriptedLink([None, None, None])
    await _run(link)
    assert link.hosts == ["h1", "h1", "h1", "h1"]
    caps = [0.1, 0.2, 0.4]
    assert all(c * 0.8 <= s <= c for s, c in zip(link.sleeps, caps, strict=True))


async def test_a_refusal_406_backs_off_the_slow_oslo_way() -> None:
    refused = aiormq.exceptions.ChannelPreconditionFailed("PRECONDITION_FAILED")
    link = ScriptedLink([refused, refused], backoff=Backoff(0.1, 0.5))
    await _run(link)
    assert link.sleeps == [1.0, 3.0]  # rabbit_retry_interval + rabbit_retry_backoff * n


async def test_a_refused_attempt_leaves_no_open_connection_for_the_finaliser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aio_pika drops the Connection of a failed attempt. Left open, its finaliser schedules
    close(), and a garbage collection in a thread with no running loop leaves that coroutine
    never awaited (the RuntimeWarning seen in the broker-restart test)."""
    made: list[aio_pika.Connection] = []

    class Recorded(broker.ClosingConnection):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(broker, "ClosingConnection", Recorded)
    port = free_port()  # nothing listens: the attempt is refused at once
    url = parse_transport_url(f"rabbit://u:p@127.0.0.1:{port}/v")
    with pytest.raises(OSError):
        await broker.open_connection(OsloMessagingRabbitOptions(), url, url.hosts[0], "test")
    assert len(made) == 1 and made[0].is_closed
