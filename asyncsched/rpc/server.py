"""The scheduler's oslo.messaging RPC server on RabbitMQ (aio-pika).

Lifecycle: ``await start()`` connects (failing over across the brokers of ``transport_url``),
declares what an oslo RPC server for topic ``scheduler`` declares and consumes; a lost
connection is re-established with backoff, re-declared and consumed again. ``drain()`` stops
consuming and waits for in-flight calls to reply; ``close()`` tears everything down.

Delivery semantics differ from oslo on purpose: oslo acks before dispatch (a crash loses the
request); we ack a request only after its reply was confirmed by the broker. A redelivered
request whose ``_unique_id`` was already answered is answered again from a bounded cache, and
one that is still running waits for that run, so no request is scheduled twice by a process.
Prefetch (per consumer) plus a semaphore bound the work we hold; the rest waits in RabbitMQ.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import ssl
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aio_pika
import aiormq.exceptions

from asyncsched.conf.options import Config
from asyncsched.conf.transport_url import BrokerHost, parse_transport_url
from asyncsched.exceptions import NovaException, NoValidHost
from asyncsched.logs import request_context
from asyncsched.objects import codec
from asyncsched.objects.codec import CodecError
from asyncsched.rpc import dispatcher, wire
from asyncsched.rpc.interfaces import HostStateEvents, SchedulerAPI
from asyncsched.rpc.reply_cache import Outcome, ReplyCache
from asyncsched.rpc.topology import QueueDecl, Topology, build_topology, prefetch_count

# Lines logged while a request is handled carry its ids through asyncsched.logs; the messages
# below also name the request id so they stand alone in any log format.
LOG = logging.getLogger("asyncsched.rpc")

CONNECT_TIMEOUT = 10.0
RETURN_RETRY_INTERVAL = 0.25


class RPCServer:
    """oslo RPC server for topic ``scheduler``; see the module docstring for the semantics."""

    def __init__(
        self,
        config: Config,
        scheduler: SchedulerAPI,
        events: HostStateEvents,
        *,
        topic: str = "scheduler",
    ) -> None:
        self._config = config
        self._rabbit = config.oslo_messaging_rabbit
        self._opts = config.asyncsched
        self._scheduler = scheduler
        self._events = events
        self._url = parse_transport_url(config.default.transport_url)
        self._topology: Topology = build_topology(
            self._rabbit,
            control_exchange=config.default.control_exchange,
            topic=topic,
            server=config.default.host,
        )
        self._prefetch = prefetch_count(self._rabbit, self._opts.max_concurrent_requests)
        self._call_slots = asyncio.Semaphore(self._opts.max_concurrent_requests)
        # Host-state casts are applied one at a time, in arrival order (update then delete of
        # the same instance must not swap); they are cheap cache updates.
        self._cast_slots = asyncio.Semaphore(1)
        self._cache = ReplyCache(self._opts.reply_cache_size, self._opts.reply_cache_ttl)
        self._inflight: dict[str, asyncio.Future[Outcome]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._connection: Any = None
        self._publisher: Any = None
        self._consumers: list[tuple[Any, str]] = []
        self._connected = asyncio.Event()
        self._ready = asyncio.Event()
        self._lost = asyncio.Event()
        self._wakeup = asyncio.Event()
        self._supervisor: asyncio.Task[None] | None = None
        self._stopping = False
        self._accepting = True
        self._host_index = 0
        self._broker: BrokerHost | None = None
        self._last_error: str | None = None
        self._active_calls = 0
        self._stream_offset: int | None = None  # rabbit_stream_fanout: last offset seen
        self.stats: Counter[str] = Counter()
        self.connection_name = f"asyncsched:{os.getpid()}:{uuid.uuid4().hex}"

    # ---------------------------------------------------------------------------------------
    # Lifecycle.

    async def __aenter__(self) -> RPCServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.drain(self._opts.drain_timeout)
        await self.close()

    async def start(self, timeout: float | None = None) -> None:  # noqa: ASYNC109
        """Connect, declare and consume. Waits for the first success (retrying brokers)."""
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

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (the contract)
        """Stop taking requests and wait up to ``timeout`` s for in-flight ones to reply."""
        self._accepting = False
        await self._cancel_consumers()
        pending = {t for t in self._tasks if not t.done()}
        if pending:
            LOG.info("Draining %d in-flight RPC requests", len(pending))
            _, still = await asyncio.wait(pending, timeout=timeout)
            if still:
                LOG.warning(
                    "%d RPC requests still running after %.1fs; they stay unacked and "
                    "RabbitMQ redelivers them",
                    len(still),
                    timeout,
                )

    async def close(self) -> None:
        """Tear down. Unacked requests go back to their queue when the connection closes."""
        self._stopping = True
        self._accepting = False
        self._wakeup.set()
        self._lost.set()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
            self._supervisor = None
        await self._teardown()

    def health(self) -> dict[str, Any]:
        """A JSON-able snapshot for the health endpoint / file."""
        return {
            "connected": self._connected.is_set(),
            "accepting": self._accepting and not self._stopping,
            "broker": None if self._broker is None else self._broker.redacted(),
            "virtual_host": self._url.virtual_host,
            "queues": [q.name for q in self._topology.queues],
            "prefetch": self._prefetch,
            "in_flight": sum(1 for t in self._tasks if not t.done()),
            "active_calls": self._active_calls,
            "reply_cache": len(self._cache),
            "reply_cache_bytes": self._cache.bytes,
            "last_error": self._last_error,
            "stats": dict(self.stats),
        }

    @property
    def topology(self) -> Topology:
        return self._topology

    # ---------------------------------------------------------------------------------------
    # Connection supervision.

    async def _run(self) -> None:
        failures = 0
        while not self._stopping:
            host = self._url.hosts[self._host_index % len(self._url.hosts)]
            try:
                await self._connect(host)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, aiormq.exceptions.ChannelPreconditionFailed):
                    LOG.error(
                        "RabbitMQ refused our declarations (406): %s. [oslo_messaging_rabbit] "
                        "must match the deployment's (durable/quorum/ttl options).",
                        exc,
                    )
                self._last_error = f"{type(exc).__name__}: {exc}"
                LOG.warning("RabbitMQ %s: %s", host.redacted(), self._last_error)
                await self._teardown()
                self._host_index += 1
                delay = min(
                    self._rabbit.rabbit_retry_interval
                    + self._rabbit.rabbit_retry_backoff * failures,
                    self._rabbit.rabbit_interval_max,
                )
                failures += 1
                await self._sleep(delay)
                continue
            failures = 0
            self._ready.set()
            await self._lost.wait()
            if self._stopping:
                break
            self.stats["reconnects"] += 1
            LOG.warning("Lost RabbitMQ connection to %s; reconnecting", host.redacted())
            await self._teardown()
            await self._sleep(self._rabbit.kombu_reconnect_delay)

    async def _sleep(self, delay: float) -> None:
        self._wakeup.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wakeup.wait(), timeout=delay)

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not (self._rabbit.ssl or self._url.ssl):
            return None
        ctx = ssl.create_default_context(cafile=self._rabbit.ssl_ca_file)
        # kombu/oslo verify the broker only when a CA file is configured, and not its name.
        ctx.check_hostname = False
        if not self._rabbit.ssl_ca_file:
            ctx.verify_mode = ssl.CERT_NONE
        if self._rabbit.ssl_cert_file:
            ctx.load_cert_chain(self._rabbit.ssl_cert_file, self._rabbit.ssl_key_file)
        return ctx

    async def _connect(self, host: BrokerHost) -> None:
        lost = asyncio.Event()
        self._lost = lost
        ssl_context = self._ssl_context()
        self._connection = await aio_pika.connect(
            host=host.host,
            port=host.port,
            login=host.username,
            password=host.password,
            virtualhost=self._url.virtual_host,
            ssl=ssl_context is not None,
            ssl_context=ssl_context,
            timeout=CONNECT_TIMEOUT,
            heartbeat=self._rabbit.heartbeat_timeout_threshold,
            client_properties={"connection_name": self.connection_name, "product": "asyncsched"},
        )
        self._broker = host

        def on_close(*_: Any) -> None:
            lost.set()

        def on_cancel(*_: Any) -> None:
            # The broker cancelled a consumer (queue deleted, HA failover): start afresh, which
            # re-declares the queue, instead of silently consuming nothing.
            if self._accepting and not self._stopping:
                LOG.warning("RabbitMQ cancelled one of our consumers; re-declaring")
                lost.set()

        self._connection.close_callbacks.add(on_close)
        publisher = await self._connection.channel(publisher_confirms=True, on_return_raises=True)
        publisher.close_callbacks.add(on_close)
        topo = self._topology
        channels: dict[str, Any] = {}
        for kind, exchange in (("topic", topo.control_exchange), ("fanout", topo.fanout_exchange)):
            ch = await self._connection.channel()
            ch.close_callbacks.add(on_close)
            (await ch.get_underlay_channel()).on_consumer_cancel_callbacks.add(on_cancel)
            await ch.set_qos(prefetch_count=self._prefetch)
            channels[kind] = (
                ch,
                await ch.declare_exchange(
                    exchange.name,
                    exchange.type,
                    durable=exchange.durable,
                    auto_delete=exchange.auto_delete,
                ),
            )
        consumers: list[tuple[Any, str]] = []
        for decl in topo.queues:
            ch, exchange = channels[decl.kind]
            queue = await ch.declare_queue(
                decl.name,
                durable=decl.durable,
                auto_delete=decl.auto_delete,
                arguments=dict(decl.arguments) or None,
            )
            await queue.bind(exchange, routing_key=decl.routing_key)
            if self._accepting:
                consumer_args = dict(decl.consumer_arguments)
                if "x-stream-offset" in consumer_args and self._stream_offset is not None:
                    # Resume a stream fanout after the last message we handled, as oslo does.
                    consumer_args["x-stream-offset"] = self._stream_offset + 1
                tag = await queue.consume(
                    functools.partial(self._on_message, decl), arguments=consumer_args or None
                )
                consumers.append((queue, tag))
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

    async def _cancel_consumers(self) -> None:
        consumers, self._consumers = self._consumers, []
        for queue, tag in consumers:
            with contextlib.suppress(Exception):
                await queue.cancel(tag)

    async def _teardown(self) -> None:
        self._connected.clear()
        self._publisher = None
        self._consumers = []
        conn, self._connection = self._connection, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), timeout=5)

    # ---------------------------------------------------------------------------------------
    # Messages in.

    async def _on_message(self, decl: QueueDecl, message: Any) -> None:
        task = asyncio.create_task(self._handle(decl, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, decl: QueueDecl, message: Any) -> None:
        self.stats["received"] += 1
        offset = (message.headers or {}).get("x-stream-offset")
        if isinstance(offset, int) and not isinstance(offset, bool):
            self._stream_offset = max(offset, self._stream_offset or 0)
        try:
            await self._handle_inner(decl, message)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Never reached by bad input (that is answered); a bug or a broker error here.
            LOG.exception("Unexpected error handling a message from %s", decl.name)
            self.stats["errors"] += 1
            with contextlib.suppress(Exception):
                await message.reject(requeue=False)

    async def _handle_inner(self, decl: QueueDecl, message: Any) -> None:
        try:
            headers = message.headers or {}
            compression = headers.get("compression")
            body = wire.decompress(
                message.body,
                compression if isinstance(compression, str) else None,
                self._opts.max_message_bytes,
            )
            incoming = wire.parse_message(wire.decode_body(body, self._opts.max_message_bytes))
        except wire.MalformedMessage as exc:
            await self._refuse(message, exc)
            return
        ctx = incoming.context
        with request_context(ctx.request_id, ctx.global_request_id):
            await self._serve(message, incoming)

    async def _serve(self, message: Any, incoming: wire.IncomingMessage) -> None:
        """Answer one well-formed request once: from the cache, from its running twin, or anew."""
        uid = incoming.unique_id
        rid = incoming.context.request_id
        future: asyncio.Future[Outcome] | None = None
        if uid:
            cached = self._cache.get(uid)
            if cached is not None:
                self.stats["duplicates"] += 1
                LOG.info(
                    "Redelivered %s (request_id=%s, unique_id=%s): answering from cache",
                    incoming.method,
                    rid,
                    uid,
                )
                await self._finish(message, incoming, cached)
                return
            running = self._inflight.get(uid)
            if running is not None:
                self.stats["duplicates"] += 1
                LOG.info(
                    "Redelivered %s (request_id=%s) is still running; waiting for it",
                    incoming.method,
                    rid,
                )
                await self._finish(message, incoming, await asyncio.shield(running))
                return
            future = asyncio.get_running_loop().create_future()
            self._inflight[uid] = future
        try:
            outcome = await self._execute(incoming)
        except BaseException:
            if future is not None and not future.done():
                future.cancel()
            raise
        finally:
            if uid:
                self._inflight.pop(uid, None)
        if uid:
            self._cache.put(uid, outcome, size=_outcome_size(outcome))
        if future is not None and not future.done():
            future.set_result(outcome)
        await self._finish(message, incoming, outcome)

    async def _finish(self, message: Any, incoming: wire.IncomingMessage, outcome: Outcome) -> None:
        """Reply (calls only), then ack: the request leaves RabbitMQ only once answered."""
        if incoming.address is not None:
            await self._send_reply(incoming.address, outcome, incoming.context.request_id)
        await self._ack(message)

    async def _refuse(self, message: Any, exc: wire.MalformedMessage) -> None:
        self.stats["malformed"] += 1
        if exc.address is not None:
            LOG.warning("Malformed call (msg_id=%s): %s", exc.address.msg_id, exc.reason)
            await self._send_reply(exc.address, Outcome(failure=wire.malformed_failure(exc.reason)))
            await self._ack(message)
            return
        LOG.warning("Rejected a malformed message with no reply address: %s", exc.reason)
        with contextlib.suppress(Exception):
            await message.reject(requeue=False)

    async def _ack(self, message: Any) -> None:
        try:
            await message.ack()
        except Exception as exc:
            # The channel died with the connection; RabbitMQ redelivers and the cache answers.
            LOG.debug("Ack failed (%s); the request will be redelivered", exc)

    # ---------------------------------------------------------------------------------------
    # Dispatch.

    async def _execute(self, incoming: wire.IncomingMessage) -> Outcome:
        rid = incoming.context.request_id
        try:
            endpoint = dispatcher.resolve(incoming.namespace, incoming.version, incoming.method)
        except dispatcher.NoSuchMethod:
            LOG.warning("No such RPC method %r (request_id=%s)", incoming.method, rid)
            return Outcome(failure=wire.no_such_method(incoming.method))
        except dispatcher.UnsupportedVersion:
            LOG.warning(
                "Unsupported RPC version %s for %r (request_id=%s)",
                incoming.version,
                incoming.method,
                rid,
            )
            return Outcome(failure=wire.unsupported_version(incoming.version, incoming.method))
        heartbeat: asyncio.Task[None] | None = None
        interval = incoming.heartbeat_interval
        if incoming.address is not None and interval is not None:
            heartbeat = asyncio.create_task(self._heartbeats(incoming.address, interval))
        elif incoming.address is not None and incoming.timeout:
            LOG.warning(
                "_timeout=%s too small for heartbeats (request_id=%s)", incoming.timeout, rid
            )
        slots = self._call_slots if incoming.is_call else self._cast_slots
        try:
            async with slots:
                self._active_calls += incoming.is_call
                try:
                    result = await self._invoke(endpoint, incoming)
                finally:
                    self._active_calls -= incoming.is_call
            self.stats["ok"] += 1
            return Outcome(result=result)
        except NoValidHost as exc:
            LOG.info("NoValidHost for request_id=%s: %s", rid, exc.message)
            self.stats["no_valid_host"] += 1
            return Outcome(failure=wire.nova_failure(exc))
        except NovaException as exc:
            LOG.warning("%s for request_id=%s: %s", type(exc).__name__, rid, exc.message)
            self.stats["nova_errors"] += 1
            return Outcome(failure=wire.nova_failure(exc))
        except CodecError as exc:
            LOG.warning("Malformed %s (request_id=%s): %s", incoming.method, rid, exc)
            self.stats["malformed"] += 1
            return Outcome(failure=wire.malformed_failure(str(exc)))
        except Exception:
            LOG.exception("Error in %s (request_id=%s)", incoming.method, rid)
            self.stats["errors"] += 1
            return Outcome(failure=wire.internal_failure(rid))
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await heartbeat

    async def _invoke(self, endpoint: dispatcher.Endpoint, incoming: wire.IncomingMessage) -> Any:
        args = incoming.args
        method = incoming.method
        if endpoint is dispatcher.BASEAPI_ENDPOINT:
            if method == "ping":
                return {"service": "scheduler", "arg": args.get("arg")}
            return None  # get_backdoor_port: no eventlet backdoor here
        handler: Callable[[wire.IncomingMessage], Awaitable[Any]] = getattr(self, f"_m_{method}")
        return await handler(incoming)

    async def _m_select_destinations(self, incoming: wire.IncomingMessage) -> Any:
        args = incoming.args
        if args.get("spec_obj") is not None:
            spec = codec.decode_request_spec(args["spec_obj"], "args.spec_obj")
        elif args.get("request_spec") is not None:
            spec = codec.request_spec_from_legacy(
                args["request_spec"], args.get("filter_properties"), "args.request_spec"
            )
        else:
            raise CodecError("args", "select_destinations needs spec_obj or request_spec")
        raw_uuids = args.get("instance_uuids")
        instance_uuids = (
            None if raw_uuids is None else list(_str_list(raw_uuids, "args.instance_uuids"))
        )
        return_objects = _bool_arg(args, "return_objects")
        return_alternates = _bool_arg(args, "return_alternates")
        selections = await self._scheduler.select_destinations(
            incoming.context, spec, instance_uuids, return_objects, return_alternates
        )
        return codec.encode_selections(selections, return_objects)

    async def _m_update_aggregates(self, incoming: wire.IncomingMessage) -> None:
        aggregates = codec.decode_aggregates(incoming.args.get("aggregates"), "args.aggregates")
        await self._events.update_aggregates(aggregates)

    async def _m_delete_aggregate(self, incoming: wire.IncomingMessage) -> None:
        raw = incoming.args.get("aggregate")
        if raw is None:
            raise CodecError("args.aggregate", "required argument is missing")
        await self._events.delete_aggregate(codec.decode_aggregate(raw, "args.aggregate"))

    async def _m_update_instance_info(self, incoming: wire.IncomingMessage) -> None:
        host = _str_arg(incoming.args, "host_name")
        uuids = codec.decode_instance_uuids(
            incoming.args.get("instance_info"), "args.instance_info"
        )
        await self._events.update_instance_info(host, uuids)

    async def _m_delete_instance_info(self, incoming: wire.IncomingMessage) -> None:
        host = _str_arg(incoming.args, "host_name")
        await self._events.delete_instance_info(host, _str_arg(incoming.args, "instance_uuid"))

    async def _m_sync_instance_info(self, incoming: wire.IncomingMessage) -> None:
        host = _str_arg(incoming.args, "host_name")
        uuids = _str_list(incoming.args.get("instance_uuids"), "args.instance_uuids")
        await self._events.sync_instance_info(host, uuids)

    # ---------------------------------------------------------------------------------------
    # Replies out.

    async def _heartbeats(self, address: wire.ReplyAddress, interval: float) -> None:
        """oslo's call-monitor watchdog: ``ending: false`` every ``_timeout/2`` seconds."""
        while True:
            await asyncio.sleep(interval)
            await self._publish(address.reply_q, wire.heartbeat_body(address.msg_id), retry=0.0)
            self.stats["heartbeats"] += 1

    async def _send_reply(
        self, address: wire.ReplyAddress, outcome: Outcome, request_id: str | None = None
    ) -> None:
        try:
            body = wire.reply_body(address.msg_id, outcome.result, outcome.failure, ending=True)
        except (TypeError, ValueError, RecursionError):
            LOG.exception("Reply of request_id=%s cannot be serialised", request_id)
            failure = wire.internal_failure(request_id)
            body = wire.reply_body(address.msg_id, None, failure, ending=True)
        if await self._publish(
            address.reply_q, body, retry=float(self._rabbit.kombu_missing_consumer_retry_timeout)
        ):
            self.stats["replies"] += 1
        else:
            self.stats["replies_dropped"] += 1
            LOG.warning(
                "Reply to %s (request_id=%s) could not be delivered; dropped",
                address.reply_q,
                request_id,
            )

    async def _publish(self, routing_key: str, body: bytes, *, retry: float) -> bool:
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
                if loop.time() + RETURN_RETRY_INTERVAL > deadline:
                    return False
                await asyncio.sleep(RETURN_RETRY_INTERVAL)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                LOG.debug("Publish to %s failed (%s); retrying", routing_key, exc)
                if loop.time() + RETURN_RETRY_INTERVAL > deadline:
                    return False
                await asyncio.sleep(RETURN_RETRY_INTERVAL)


def _outcome_size(outcome: Outcome) -> int:
    """Roughly the bytes a cached reply holds (its JSON length)."""
    size = len(outcome.failure or "")
    if outcome.result is not None:
        size += len(json.dumps(outcome.result, default=str))
    return size


def _str_arg(args: Any, name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise CodecError(f"args.{name}", "a string is required")
    return value


def _str_list(value: Any, path: str) -> Sequence[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CodecError(path, "a list of strings is required")
    return tuple(value)


def _bool_arg(args: Any, name: str) -> bool:
    value = args.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise CodecError(f"args.{name}", "a boolean is required")
    return value
