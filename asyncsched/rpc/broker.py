"""Broker supervision: one connection to RabbitMQ, kept alive, declared and consumed.

``BrokerLink`` connects to the brokers of ``transport_url`` in turn (failover), declares the
topology an oslo RPC server declares, consumes its queues and hands every delivery to the
server's handler. Any loss (connection or channel closed, a consumer cancelled by the broker)
tears it all down and starts again at once; a failed attempt moves on to the next broker after
a short delay (0.1 s doubling to 0.5 s, with jitter: ``asyncsched.common.backoff``). The schedule is
fast on purpose: with nova's default transient queues, a restarted broker drops every call
published before we re-declare the ``scheduler`` queue (oslo's +1, +2, +5, +10 s schedule lost
93 calls in one measured restart). Only a refusal of our declarations (406, a configuration
mismatch) backs off the slow oslo way. Replies go out through ``publish`` on a confirming
channel, which waits out a reconnect for as long as the caller allows.

What a message means, and when it is acked, is the server's business, not this module's.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import ssl
from collections.abc import Awaitable, Callable

import aio_pika
import aiormq.exceptions
from aio_pika.abc import (
    AbstractChannel,
    AbstractConnection,
    AbstractExchange,
    AbstractIncomingMessage,
    AbstractQueue,
    ConsumerTag,
    TimeoutType,
)
from aiormq.abc import AbstractChannel as AbstractUnderlayChannel

from asyncsched.common.backoff import Backoff
from asyncsched.common.tasks import cancel_and_wait
from asyncsched.conf.options import OsloMessagingRabbitOptions
from asyncsched.conf.transport_url import BrokerHost, TransportURL
from asyncsched.rpc import wire
from asyncsched.rpc.stats import RPCCounters
from asyncsched.rpc.topology import ExchangeDecl, QueueDecl, Topology

LOG = logging.getLogger("asyncsched.rpc")

CONNECT_TIMEOUT = 10.0
RETURN_RETRY_INTERVAL = 0.25
# [asyncsched] broker_reconnect_delay / broker_reconnect_delay_max defaults.
DEFAULT_BACKOFF = Backoff(0.1, 0.5)
# A connection lost sooner than this after it was set up counts as a failed attempt.
STABLE_AFTER = 2.0

MessageHandler = Callable[[QueueDecl, AbstractIncomingMessage], Awaitable[None]]


def ssl_context(rabbit: OsloMessagingRabbitOptions, url: TransportURL) -> ssl.SSLContext | None:
    """TLS as kombu/oslo set it up: verify the broker only when a CA file is configured."""
    if not (rabbit.ssl or url.ssl):
        return None
    ctx = ssl.create_default_context(cafile=rabbit.ssl_ca_file)
    # kombu/oslo verify the broker only when a CA file is configured, and not its name.
    ctx.check_hostname = False
    if not rabbit.ssl_ca_file:
        ctx.verify_mode = ssl.CERT_NONE
    if rabbit.ssl_cert_file:
        ctx.load_cert_chain(rabbit.ssl_cert_file, rabbit.ssl_key_file)
    return ctx


class ClosingConnection(aio_pika.Connection):
    """A connection that closes itself when its attempt fails. Else the object aio_pika drops
    stays open, and its finaliser schedules ``close()``: from a thread with no running loop (a
    garbage collection there) that coroutine is never awaited."""

    async def connect(self, timeout: TimeoutType = None) -> None:  # noqa: ASYNC109 (aio_pika's)
        try:
            await super().connect(timeout)
        except BaseException:
            with contextlib.suppress(Exception):
                await self.close()
            raise


async def open_connection(
    rabbit: OsloMessagingRabbitOptions, url: TransportURL, host: BrokerHost, name: str
) -> AbstractConnection:
    """One AMQP connection to ``host`` with oslo's heartbeat and TLS, named for the broker UI."""
    tls = ssl_context(rabbit, url)
    return await aio_pika.connect(
        host=host.host,
        port=host.port,
        login=host.username,
        password=host.password,
        virtualhost=url.virtual_host,
        ssl=tls is not None,
        ssl_context=tls,
        timeout=CONNECT_TIMEOUT,
        heartbeat=rabbit.heartbeat_timeout_threshold,
        client_properties={"connection_name": name, "product": "asyncsched"},
        connection_class=ClosingConnection,
    )


class BrokerLink:
    """Connection, topology and consumers for one RPC server; see the module docstring."""

    def __init__(
        self,
        rabbit: OsloMessagingRabbitOptions,
        url: TransportURL,
        topology: Topology,
        prefetch: int,
        on_message: MessageHandler,
        *,
        connection_name: str,
        stats: RPCCounters,
        backoff: Backoff = DEFAULT_BACKOFF,
        rng: random.Random | None = None,
    ) -> None:
        self._rabbit = rabbit
        self._backoff = backoff
        self._rng = rng or random.Random()
        self._url = url
        self._topology = topology
        self._prefetch = prefetch
        self._on_message = on_message
        self._connection_name = connection_name
        self._stats = stats
        self._connection: AbstractConnection | None = None
        self._publisher: AbstractChannel | None = None
        self._consumers: list[tuple[AbstractQueue, ConsumerTag]] = []
        # The declared queues and the channel of each, to consume again after a pause.
        self._queues: list[tuple[QueueDecl, AbstractQueue, AbstractChannel]] = []
        self._paused = False  # set_flow: consumers cancelled, held messages kept
        self._consumer_prefetch = prefetch
        self._flow_lock = asyncio.Lock()
        self._connected = asyncio.Event()
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False
        self._consuming = True
        self._host_index = 0
        self._broker: BrokerHost | None = None
        self._last_error: str | None = None
        self._stream_offset: int | None = None  # rabbit_stream_fanout: last offset seen

    @property
    def connected(self) -> bool:
        return self._connected.is_set()

    @property
    def consuming(self) -> bool:
        """False once ``stop_consuming`` or ``stop`` was called; reconnects then only publish."""
        return self._consuming and not self._stopping

    @property
    def broker(self) -> BrokerHost | None:
        """The broker of the current (or last) connection."""
        return self._broker

    @property
    def last_error(self) -> str | None:
        return self._last_error

    async def start(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Start supervising; return once connected, declared and consuming the first time."""
        if self._stopping:
            raise RuntimeError("RPCServer was closed; build a new one")
        if self._supervisor is not None:
            return
        self._supervisor = asyncio.create_task(self._run(), name="asyncsched-rpc-supervisor")
        ready = asyncio.create_task(self._ready.wait())
        try:
            done, _ = await asyncio.wait(
                {ready, self._supervisor}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if self._supervisor in done:
            self._supervisor.result()  # re-raise what killed it
        if not self._ready.is_set():
            raise TimeoutError(f"RabbitMQ not reachable: {self._last_error}")

    async def stop_consuming(self) -> None:
        """Cancel our consumers (and consume no more after a reconnect); publishing goes on."""
        self._consuming = False
        consumers, self._consumers = self._consumers, []
        for queue, tag in consumers:
            with contextlib.suppress(Exception):
                await queue.cancel(tag)

    async def set_flow(self, paused: bool, prefetch: int) -> None:
        """Pause the consumers, or consume with ``prefetch`` (again, if it changed).

        Held messages stay unacked either way; a reconnect applies the last state asked for.
        """
        self._paused, self._prefetch = paused, prefetch
        async with self._flow_lock:
            if not self._connected.is_set():
                return  # the next _connect applies it
            want = self.consuming and not self._paused
            if self._consumers and (not want or self._consumer_prefetch != self._prefetch):
                consumers, self._consumers = self._consumers, []
                for queue, tag in consumers:
                    with contextlib.suppress(Exception):
                        await queue.cancel(tag)
            if want and not self._consumers:
                with contextlib.suppress(Exception):
                    self._consumers = await self._consume(self._queues)

    async def _consume(
        self, queues: list[tuple[QueueDecl, AbstractQueue, AbstractChannel]]
    ) -> list[tuple[AbstractQueue, ConsumerTag]]:
        """Consume every queue with the current prefetch (basic.qos applies to new consumers)."""
        for channel in {id(ch): ch for _, _, ch in queues}.values():
            await channel.set_qos(prefetch_count=self._prefetch)
        self._consumer_prefetch = self._prefetch
        consumers: list[tuple[AbstractQueue, ConsumerTag]] = []
        for decl, queue, _ in queues:
            consumer_args = dict(decl.consumer_arguments)
            if "x-stream-offset" in consumer_args and self._stream_offset is not None:
                # Resume a stream fanout after the last message we handled, as oslo does.
                consumer_args["x-stream-offset"] = self._stream_offset + 1
            tag = await queue.consume(
                functools.partial(self._deliver, decl), arguments=consumer_args or None
            )
            consumers.append((queue, tag))
        return consumers

    def stop(self) -> None:
        """Stop consuming and reconnecting; ``publish`` gives up instead of waiting."""
        self._stopping = True
        self._consuming = False
        self._wakeup.set()
        self._lost.set()

    async def close(self) -> None:
        """``stop``, end the supervisor and close the connection (unacked messages requeue)."""
        self.stop()
        await cancel_and_wait(self._supervisor, quiet=True)
        self._supervisor = None
        await self._teardown()

    async def publish(self, routing_key: str, body: bytes, *, retry: float) -> bool:
        """Publish to the default exchange with confirms; True once the broker took it.

        A returned message (no reply queue yet/anymore) is retried every 0.25 s for ``retry``
        seconds as oslo does; a broken connection is waited out for as long.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + retry
        while True:
            publisher = self._publisher
            if publisher is None or not self._connected.is_set():
                left = deadline - loop.time()
                if left <= 0 or self._stopping:
                    return False
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._connected.wait(), timeout=left)
                continue
            try:
                await publisher.default_exchange.publish(
                    aio_pika.Message(
                        body,
                        content_type=wire.CONTENT_TYPE,
                        content_encoding=wire.CONTENT_ENCODING,
                        delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                        priority=0,
                        headers={},
                    ),
                    routing_key=routing_key,
                    mandatory=self._rabbit.direct_mandatory_flag,
                    timeout=CONNECT_TIMEOUT,
                )
                return True
            except aiormq.exceptions.PublishError:
                pass  # returned: no such reply queue (yet)
            except Exception as exc:
                LOG.debug("Publish to %s failed (%s); retrying", routing_key, exc)
            if loop.time() + RETURN_RETRY_INTERVAL > deadline:
                return False
            self._stats.publish_retries += 1
            await asyncio.sleep(RETURN_RETRY_INTERVAL)

    # ---------------------------------------------------------------------------------------
    # Supervision.

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            host = self._url.hosts[self._host_index % len(self._url.hosts)]
            try:
                await self._connect(host)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                refused = isinstance(exc, aiormq.exceptions.ChannelPreconditionFailed)
                if refused:
                    LOG.error(
                        "RabbitMQ refused our declarations (406): %s. [oslo_messaging_rabbit] "
                        "must match the deployment's (durable/quorum/ttl options).",
                        exc,
                    )
                self._last_error = f"{type(exc).__name__}: {exc}"
                # Attempts come several times a second while a broker is away: log a few.
                log = LOG.warning if failures < 3 or failures % 50 == 0 else LOG.debug
                log("RabbitMQ %s (attempt %d): %s", host.redacted(), failures + 1, self._last_error)
                await self._teardown()
                self._host_index += 1
                delay = (
                    self._refusal_delay(failures)
                    if refused
                    else self._backoff.delay(failures, self._rng)
                )
                failures += 1
                await self._sleep(delay)
                continue
            if failures:
                LOG.info("RabbitMQ %s is back after %d failed attempts", host.redacted(), failures)
            self._ready.set()
            up_since = asyncio.get_running_loop().time()
            await self._lost.wait()
            if self._stopping:
                break
            self._stats.reconnects += 1
            LOG.warning("Lost RabbitMQ connection to %s; reconnecting", host.redacted())
            await self._teardown()
            if asyncio.get_running_loop().time() - up_since >= STABLE_AFTER:
                failures = 0  # reconnect at once
            else:
                # Lost as soon as it was up (a broker closing us, a queue deleted in a loop):
                # back off as after a failed attempt instead of reconnecting in a tight loop.
                await self._sleep(self._backoff.delay(failures, self._rng))
                failures += 1

    def _refusal_delay(self, failures: int) -> float:
        """oslo's linear backoff: a 406 will not go away by itself; do not flood the log."""
        rabbit = self._rabbit
        return min(
            rabbit.rabbit_retry_interval + rabbit.rabbit_retry_backoff * failures,
            rabbit.rabbit_interval_max,
        )

    async def _sleep(self, delay: float) -> None:
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout=delay)

    async def _connect(self, host: BrokerHost) -> None:
        lost = asyncio.Event()
        self._lost = lost
        connection = await open_connection(self._rabbit, self._url, host, self._connection_name)
        self._connection = connection
        self._broker = host

        def on_close(*_: object) -> None:
            lost.set()

        def on_cancel(*_: object) -> None:
            # The broker cancelled a consumer (queue deleted, HA failover): start afresh, which
            # re-declares the queue, instead of silently consuming nothing.
            if self.consuming and not self._paused:
                LOG.warning("RabbitMQ cancelled one of our consumers; re-declaring")
                lost.set()

        connection.close_callbacks.add(on_close)
        publisher = await _open_channel(connection, publisher_confirms=True, on_return_raises=True)
        publisher.close_callbacks.add(on_close)
        topo = self._topology
        # One consuming channel per exchange: the topic queues (calls and casts) and the fanout.
        channels: dict[ExchangeDecl, tuple[AbstractChannel, AbstractExchange]] = {}
        for exchange in (topo.control_exchange, topo.fanout_exchange):
            ch = await _open_channel(connection)
            ch.close_callbacks.add(on_close)
            underlay: AbstractUnderlayChannel = await ch.get_underlay_channel()
            underlay.on_consumer_cancel_callbacks.add(on_cancel)
            channels[exchange] = (
                ch,
                await ch.declare_exchange(
                    exchange.name,
                    exchange.type,
                    durable=exchange.durable,
                    auto_delete=exchange.auto_delete,
                ),
            )
        queues: list[tuple[QueueDecl, AbstractQueue, AbstractChannel]] = []
        for decl in topo.queues:
            ch, bound_to = channels[decl.exchange]
            queue = await ch.declare_queue(
                decl.name,
                durable=decl.durable,
                auto_delete=decl.auto_delete,
                arguments=dict(decl.arguments) or None,
            )
            await queue.bind(bound_to, routing_key=decl.routing_key)
            queues.append((decl, queue, ch))
        async with self._flow_lock:  # a set_flow meanwhile is applied here or after
            consuming = self._consuming and not self._paused
            consumers = await self._consume(queues) if consuming else []
            self._queues = queues
            self._publisher = publisher
            self._consumers = consumers
            self._connected.set()
        self._last_error = None
        LOG.info(
            "Consuming %s on %s vhost %s (prefetch %d)",
            ", ".join(q.name for q in topo.queues),
            host.redacted(),
            self._url.virtual_host,
            self._prefetch,
        )

    async def _deliver(self, decl: QueueDecl, message: AbstractIncomingMessage) -> None:
        offset = (message.headers or {}).get("x-stream-offset")
        if isinstance(offset, int) and not isinstance(offset, bool):
            self._stream_offset = max(offset, self._stream_offset or 0)
        await self._on_message(decl, message)

    async def _teardown(self) -> None:
        self._connected.clear()
        self._publisher = None
        self._consumers = []
        self._queues = []
        conn, self._connection = self._connection, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), timeout=5)


async def _open_channel(
    connection: AbstractConnection,
    *,
    publisher_confirms: bool = True,
    on_return_raises: bool = False,
) -> AbstractChannel:
    """``await connection.channel(...)``, spelled with the typed ``initialize``."""
    channel = connection.channel(
        publisher_confirms=publisher_confirms, on_return_raises=on_return_raises
    )
    await channel.initialize()
    return channel
