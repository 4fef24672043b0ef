"""nova-scheduler's select_destinations notifications, sent the way oslo.messaging sends them.

nova (``nova/rpc.py``) builds two notifiers over the notification transport: the legacy one
(publisher ``scheduler.<host>``, ``[oslo_messaging_notifications] topics``) is live when
``[notifications] notification_format`` is unversioned or both, the versioned one (publisher
``nova-scheduler:<host>``, ``versioned_notifications_topics``) when it is versioned or both.
Each ``driver`` sends every notification: ``messagingv2`` in the oslo 2.0 envelope,
``messaging`` without it, ``log`` to the log; none (or ``noop``) sends nothing.

The scheduler only enqueues (never waits, never fails); one worker task builds the payloads
and publishes in order. A notification that cannot be sent is logged and dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from asyncsched.common.health import Snapshot
from asyncsched.common.tasks import cancel_and_wait
from asyncsched.conf.options import Config
from asyncsched.exceptions import ConfigError
from asyncsched.notifications import payloads
from asyncsched.objects.codec import encode_context
from asyncsched.objects.models import RequestContext, RequestSpec
from asyncsched.rpc import wire

LOG = logging.getLogger(__name__)

EVENT = "scheduler.select_destinations"
SEND_DRIVERS = {"messagingv2": 2, "messaging": 1}
KNOWN_DRIVERS = frozenset({*SEND_DRIVERS, "log", "noop"})
QUEUE_SIZE = 1000
CLOSE_BUDGET = 5.0


class Publisher(Protocol):
    """Puts one body on the notification exchange with ``routing_key`` (``<topic>.<priority>``)."""

    async def publish(self, routing_key: str, body: bytes) -> None: ...
    async def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class Stream:
    """One of nova's notifiers with one of its drivers: where and how a format is sent."""

    versioned: bool
    publisher_id: str
    topics: tuple[str, ...]
    driver: str  # messagingv2 | messaging | log


def streams(config: Config) -> tuple[Stream, ...]:
    """What nova would emit for this configuration; ConfigError for a driver we cannot run."""
    drivers = [d.strip() for d in config.oslo_messaging_notifications.driver if d.strip()]
    unknown = [d for d in drivers if d not in KNOWN_DRIVERS]
    if unknown:
        raise ConfigError(
            f"[oslo_messaging_notifications] driver = {unknown[0]!r}: not supported; allowed: "
            + ", ".join(sorted(KNOWN_DRIVERS))
        )
    live = [d for d in drivers if d != "noop"]
    fmt = config.notifications.notification_format
    host = config.default.host
    out: list[Stream] = []
    for driver in dict.fromkeys(live):
        if fmt in ("unversioned", "both"):
            topics = config.oslo_messaging_notifications.topics
            out.append(Stream(False, f"scheduler.{host}", topics, driver))
        if fmt in ("versioned", "both"):
            topics = config.notifications.versioned_notifications_topics
            out.append(Stream(True, f"nova-scheduler:{host}", topics, driver))
    return tuple(out)


def oslo_message(
    ctx: RequestContext,
    publisher_id: str,
    event_type: str,
    payload: Any,
    now: datetime.datetime,
) -> dict[str, Any]:
    """``Notifier._notify``'s message plus what the AMQP driver adds (unique id, context)."""
    msg: dict[str, Any] = {
        "message_id": str(uuid.uuid4()),
        "publisher_id": publisher_id,
        "event_type": event_type,
        "priority": "INFO",
        "payload": payload,
        "timestamp": str(now),
        "_unique_id": uuid.uuid4().hex,
    }
    msg.update({f"_context_{k}": v for k, v in encode_context(ctx).items()})
    return msg


def encode(msg: Mapping[str, Any], driver: str) -> bytes:
    """The AMQP body: the oslo 2.0 envelope (messagingv2) or the bare message (messaging)."""
    if SEND_DRIVERS[driver] == 2:
        return wire.envelope(msg)
    return json.dumps(msg, default=list).encode("utf-8")


@dataclass(frozen=True, slots=True)
class NotifierHealth(Snapshot):
    """``SchedulerNotifier.health()``: events queued, sent, failed (payload), dropped (full)."""

    enabled: bool
    pending: int
    sent: int
    failed: int
    dropped: int
    last_error: str | None


class SchedulerNotifier:
    """The notifier the scheduler manager is given; a component (start, close, health)."""

    name = "notifications"

    def __init__(
        self,
        config: Config,
        publisher_factory: Callable[[], Publisher] | None,
        *,
        queue_size: int = QUEUE_SIZE,
        clock: Callable[[], datetime.datetime] | None = None,
        retry_delay: float = 1.0,
    ) -> None:
        self._streams = streams(config)
        self._factory = publisher_factory
        self._publisher: Publisher | None = None
        self._retry = config.oslo_messaging_notifications.retry
        self._retry_delay = retry_delay
        self._clock = clock or (lambda: datetime.datetime.now(datetime.UTC).replace(tzinfo=None))
        self._queue: asyncio.Queue[tuple[str, RequestContext, RequestSpec]] = asyncio.Queue(
            queue_size
        )
        self._worker: asyncio.Task[None] | None = None
        self._closing = False
        self.stats = {"sent": 0, "failed": 0, "dropped": 0}
        self._last_error: str | None = None

    @property
    def enabled(self) -> bool:
        return bool(self._streams)

    def select_destinations(self, phase: str, ctx: RequestContext, spec: RequestSpec) -> None:
        """``scheduler.select_destinations.<phase>``: queued, never waits, never raises."""
        if not self._streams or self._closing:
            return
        try:
            self._queue.put_nowait((phase, ctx, spec))
        except asyncio.QueueFull:
            self.stats["dropped"] += 1
            if self.stats["dropped"] % 100 == 1:
                LOG.warning(
                    "notifications: queue full (%d); %s.%s for %s dropped (%d so far)",
                    self._queue.maxsize,
                    EVENT,
                    phase,
                    ctx.request_id,
                    self.stats["dropped"],
                )

    async def start(self) -> None:
        if self._streams and self._worker is None:
            self._worker = asyncio.create_task(self._run(), name="notifications")
            LOG.info(
                "notifications: %s",
                ", ".join(
                    f"{'versioned' if s.versioned else 'unversioned'} via {s.driver} to "
                    f"{','.join(s.topics)}"
                    for s in self._streams
                ),
            )

    async def close(self) -> None:
        """Send what is queued (within a short budget), then stop and close the connection."""
        self._closing = True
        if self._worker is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), CLOSE_BUDGET)
            await cancel_and_wait(self._worker)
            self._worker = None
        if self._publisher is not None:
            await self._publisher.close()
            self._publisher = None

    def health(self) -> NotifierHealth:
        return NotifierHealth(
            enabled=self.enabled,
            pending=self._queue.qsize(),
            sent=self.stats["sent"],
            failed=self.stats["failed"],
            dropped=self.stats["dropped"],
            last_error=self._last_error,
        )

    async def _run(self) -> None:
        while True:
            phase, ctx, spec = await self._queue.get()
            try:
                await self._emit(phase, ctx, spec)
            except Exception as exc:  # a payload we could not build: log, never stop
                self.stats["failed"] += 1
                LOG.exception("notifications: %s.%s not sent: %s", EVENT, phase, exc)
            finally:
                self._queue.task_done()

    async def _emit(self, phase: str, ctx: RequestContext, spec: RequestSpec) -> None:
        event_type = f"{EVENT}.{phase}"
        versioned: Any = None
        legacy: Any = None
        for stream in self._streams:
            if stream.versioned:
                versioned = versioned or payloads.request_spec_payload(spec)
                payload = versioned
            else:
                legacy = legacy or {"request_spec": payloads.legacy_request_spec(spec)}
                payload = legacy
            msg = oslo_message(ctx, stream.publisher_id, event_type, payload, self._clock())
            if stream.driver == "log":
                logging.getLogger(f"oslo.messaging.notification.{event_type}").info(
                    json.dumps({k: v for k, v in msg.items() if not k.startswith("_")})
                )
                continue
            body = encode(msg, stream.driver)
            for topic in stream.topics:
                await self._send(f"{topic}.info", body, event_type)

    async def _send(self, routing_key: str, body: bytes, event_type: str) -> None:
        attempt = 0
        while True:
            try:
                if self._publisher is None:
                    if self._factory is None:
                        raise ConnectionError("no notification transport")
                    self._publisher = self._factory()
                await self._publisher.publish(routing_key, body)
                self.stats["sent"] += 1
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._last_error = f"{type(exc).__name__}: {exc}"
                if self._publisher is not None:
                    with contextlib.suppress(Exception):
                        await self._publisher.close()
                    self._publisher = None
                attempt += 1
                if self._closing or (self._retry >= 0 and attempt > self._retry):
                    self.stats["failed"] += 1
                    LOG.warning(
                        "notifications: %s to %s not sent: %s", event_type, routing_key, exc
                    )
                    return
                await asyncio.sleep(min(self._retry_delay * attempt, 30.0))


class NoopNotifier:
    """The default: nova's noop driver, nothing is sent."""

    enabled = False

    def select_destinations(self, phase: str, ctx: RequestContext, spec: RequestSpec) -> None:
        return None
