"""The scheduler's oslo.messaging RPC server on RabbitMQ (aio-pika).

Lifecycle: ``await start()`` has ``broker.BrokerLink`` connect (failing over across the brokers
of ``transport_url``), declare what an oslo RPC server for topic ``scheduler`` declares and
consume; the link re-establishes a lost connection by itself. ``drain()`` stops consuming,
hands back to RabbitMQ the held calls that have not started and waits for the running ones to
reply; ``close()`` tears everything down.

This module is intake (decode, dedup, reply, ack) and dispatch (dispatcher rules, bounded
concurrency, heartbeats, failure mapping); ``methods`` says what each method does.

Delivery semantics differ from oslo on purpose: oslo acks before dispatch (a crash loses the
request); we ack a request only after one attempt to publish its reply, confirmed by the broker
when the reply queue exists. A reply the broker returns (no such reply queue) is retried in the
background (``late_replies``), so it never holds a prefetch slot that other calls wait for. A
redelivered request (same ``_unique_id`` *and* same body digest) that was already answered is
answered again from a bounded cache (casts have one of their own, so a flood of fanout casts
never evicts a call's entry), and one that is still running waits for that run, so no
request is scheduled twice by a process; a different request that merely reuses an id is served
on its own. The prefetch (``max_held_requests``) bounds the calls the process holds and a
semaphore (``max_concurrent_requests``) the ones it runs; the rest waits in RabbitMQ. Holding
calls, as nova's unlimited prefetch does, is what keeps them across a broker restart with
nova's transient queues: RabbitMQ drops a transient queue's messages, the process does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import time
import uuid
from dataclasses import dataclass

from aio_pika.abc import AbstractIncomingMessage

from asyncsched.common.backoff import Backoff
from asyncsched.common.health import Snapshot
from asyncsched.common.pacing import Pacer
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.common.tasks import cancel_and_wait
from asyncsched.conf.options import Config
from asyncsched.conf.transport_url import parse_transport_url
from asyncsched.exceptions import AsyncschedError, NovaException, NoValidHost
from asyncsched.logs import request_context
from asyncsched.objects.codec import CodecError
from asyncsched.rpc import dispatcher, paced, validation, wire
from asyncsched.rpc.broker import BrokerLink
from asyncsched.rpc.held import HeldBytes
from asyncsched.rpc.interfaces import HostStateEvents, SchedulerAPI
from asyncsched.rpc.late_replies import LateReplies
from asyncsched.rpc.methods import method_table
from asyncsched.rpc.reply_cache import Outcome, ReplyCache
from asyncsched.rpc.stats import RPCCounters, RPCStats
from asyncsched.rpc.topology import QueueDecl, Topology, build_topology, prefetch_count

# Lines logged while a request is handled carry its ids through asyncsched.logs; the messages
# below also name the request id so they stand alone in any log format.
LOG = logging.getLogger("asyncsched.rpc")


@dataclass(frozen=True, slots=True)
class RPCHealth(Snapshot):
    """``RPCServer.health()``: the link to RabbitMQ, work in flight, the message counters."""

    connected: bool
    accepting: bool  # the consumers take messages
    broker: str | None  # redacted
    virtual_host: str
    queues: list[str]
    prefetch: int
    in_flight: int
    active_calls: int
    reply_cache: int
    cast_cache: int
    reply_cache_bytes: int
    held_bytes: int
    replies_pending: int
    last_error: str | None
    stats: RPCStats  # every counter, 0 until counted


class RPCServer:
    """oslo RPC server for topic ``scheduler``; see the module docstring for the semantics."""

    def __init__(
        self,
        config: Config,
        scheduler: SchedulerAPI,
        events: HostStateEvents,
        *,
        topic: str = "scheduler",
        recorder: Recorder = NO_RECORDER,
    ) -> None:
        self._recorder = recorder
        self._rabbit = config.oslo_messaging_rabbit
        self._opts = config.asyncsched
        self._methods = method_table(
            scheduler,
            events,
            validation.RequestBounds(max_instances=config.asyncsched.max_instances_per_request),
        )
        self._url = parse_transport_url(config.default.transport_url)
        self._topology: Topology = build_topology(
            self._rabbit,
            control_exchange=config.default.control_exchange,
            topic=topic,
            server=config.default.host,
        )
        held = max(self._opts.max_held_requests, self._opts.max_concurrent_requests)
        self._prefetch = prefetch_count(self._rabbit, held)
        self._draining = False  # calls not yet started go back to RabbitMQ
        self._held = HeldBytes(
            self._opts.max_held_bytes, self._prefetch, self._opts.max_message_bytes
        )
        self._flow = self._held.flow  # the last flow asked of the link
        self._flow_tasks: set[asyncio.Task[None]] = set()
        self._call_slots = asyncio.Semaphore(self._opts.max_concurrent_requests)
        # Host-state casts are applied one at a time, in arrival order (update then delete of
        # the same instance must not swap); they are cheap cache updates.
        self._cast_slots = asyncio.Semaphore(1)
        # The fanout's messages (all host-state casts) are read one at a time: a big one whose
        # read takes loop turns is not overtaken by a later small one (update, then delete).
        self._fanout_intake = asyncio.Lock()
        self._cache = ReplyCache(self._opts.reply_cache_size, self._opts.reply_cache_ttl)
        # Casts remember their own redeliveries: at 10,000 computes the fanout's
        # sync_instance_info casts would otherwise evict every call's reply within minutes.
        self._cast_cache = ReplyCache(self._opts.reply_cache_size, self._opts.reply_cache_ttl)
        self._inflight: dict[str, asyncio.Future[Outcome]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._active_calls = 0
        self.stats = RPCCounters()
        self.connection_name = f"asyncsched:{os.getpid()}:{uuid.uuid4().hex}"
        self._link = BrokerLink(
            self._rabbit,
            self._url,
            self._topology,
            self._prefetch,
            self._on_message,
            connection_name=self.connection_name,
            stats=self.stats,
            backoff=Backoff(
                self._opts.broker_reconnect_delay, self._opts.broker_reconnect_delay_max
            ),
        )
        self._late = LateReplies(
            self._link.publish,
            retry_for=float(self._rabbit.kombu_missing_consumer_retry_timeout),
            max_pending=self._opts.max_pending_replies,
            # Replies can be as large as requests; pending ones hold at most four such.
            max_bytes=self._opts.max_message_bytes * 4,
            stats=self.stats,
        )

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
        await self._link.start(timeout)

    async def drain(self, timeout: float) -> None:  # noqa: ASYNC109 (the contract)
        """Stop taking requests and wait up to ``timeout`` s for in-flight ones to reply."""
        await self._link.stop_consuming()
        self._draining = True
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
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
        late = self._late.pending()
        if late and deadline > loop.time():
            await asyncio.wait(late, timeout=deadline - loop.time())

    async def close(self) -> None:
        """Tear down. Unacked requests go back to their queue when the connection closes."""
        self._link.stop()
        for flow in list(self._flow_tasks):
            flow.cancel()
        await self._late.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._link.close()

    def health(self) -> RPCHealth:
        """A snapshot for the health endpoint / file."""
        return RPCHealth(
            connected=self._link.connected,
            accepting=self._link.consuming,
            broker=None if self._link.broker is None else self._link.broker.redacted(),
            virtual_host=self._url.virtual_host,
            queues=[q.name for q in self._topology.queues],
            prefetch=self._prefetch,
            in_flight=sum(1 for t in self._tasks if not t.done()),
            active_calls=self._active_calls,
            reply_cache=len(self._cache),
            cast_cache=len(self._cast_cache),
            reply_cache_bytes=self._cache.bytes,
            held_bytes=self._held.held,
            replies_pending=len(self._late),
            last_error=self._link.last_error,
            stats=self.stats.snapshot(),
        )

    @property
    def topology(self) -> Topology:
        return self._topology

    # ---------------------------------------------------------------------------------------
    # Messages in.

    async def _on_message(self, decl: QueueDecl, message: AbstractIncomingMessage) -> None:
        task = asyncio.create_task(self._handle(decl, message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, decl: QueueDecl, message: AbstractIncomingMessage) -> None:
        self.stats.received += 1
        if message.redelivered:
            self.stats.redelivered += 1
        size = len(message.body)
        if not self._held.take(size):
            # Over [asyncsched] max_held_bytes: back to RabbitMQ unread; consuming pauses.
            self.stats.over_held_bytes += 1
            self._follow_flow()
            with contextlib.suppress(Exception):
                await message.reject(requeue=True)
            return
        try:
            await self._handle_inner(decl, message)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Never reached by bad input (that is answered); a bug or a broker error here.
            LOG.exception("Unexpected error handling a message from %s", decl.name)
            self.stats.errors += 1
            address = wire.scan_address(message.body)
            if address is not None:
                with contextlib.suppress(Exception):
                    await self._send_reply(address, Outcome(failure=wire.internal_failure(None)))
            with contextlib.suppress(Exception):
                await message.reject(requeue=False)
        finally:
            self._held.give_back(size)
            self._follow_flow()

    def _follow_flow(self) -> None:
        """Have the link pause or resume consuming when the byte budget says so."""
        flow = self._held.flow
        if flow == self._flow:
            return
        self._flow = flow
        if flow.paused:
            self.stats.flow_pauses += 1
        task = asyncio.create_task(self._link.set_flow(flow.paused, flow.prefetch))
        self._flow_tasks.add(task)
        task.add_done_callback(self._flow_tasks.discard)

    async def _read(self, message: AbstractIncomingMessage) -> tuple[wire.IncomingMessage, str]:
        """Decompress, parse and check a body; the request and its digest.

        Each step is bounded (``wire.MAX_VALUES``...) and a loop turn may come between them, so
        the largest message holds the loop for one step, not all of them. A small message takes
        no turn; the fanout's are read one at a time (their casts keep their arrival order)."""
        pacer = Pacer()
        headers = message.headers or {}
        compression = headers.get("compression")
        body = wire.decompress(
            message.body,
            compression if isinstance(compression, str) else None,
            self._opts.max_message_bytes,
        )
        await pacer.tick()
        inner = await paced.drive(wire.decode_steps(body, self._opts.max_message_bytes), pacer)
        await pacer.tick()
        incoming = wire.parse_message(inner)
        try:
            validation.check_message(inner)
        except CodecError as exc:
            raise wire.MalformedMessage(str(exc), incoming.address) from None
        await pacer.tick()
        digest = _digest(body)
        await pacer.tick()
        return incoming, digest

    async def _handle_inner(self, decl: QueueDecl, message: AbstractIncomingMessage) -> None:
        fanout = decl.exchange == self._topology.fanout_exchange
        try:
            # Released with no await before the cast slot is taken in _execute: order is kept.
            async with self._fanout_intake if fanout else contextlib.nullcontext():
                incoming, digest = await self._read(message)
        except wire.MalformedMessage as exc:
            await self._refuse(message, exc)
            return
        ctx = incoming.context
        # A redelivery is the same request: same _unique_id and the same bytes. An id alone is
        # not trusted (a caller bug or a hostile peer could reuse one for another request).
        key = f"{incoming.unique_id}:{digest}" if incoming.unique_id else None
        with request_context(ctx.request_id, ctx.global_request_id):
            try:
                await self._serve(message, incoming, key)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug on our side after the request was read: the caller still gets an answer.
                LOG.exception("Unexpected error serving %s", incoming.method)
                self.stats.errors += 1
                await self._finish(
                    message, incoming, Outcome(failure=wire.internal_failure(ctx.request_id))
                )

    async def _serve(
        self, message: AbstractIncomingMessage, incoming: wire.IncomingMessage, key: str | None
    ) -> None:
        """Answer one well-formed request once: from the cache, from its running twin, or anew.

        ``key`` (``_unique_id`` + body digest) names the request; None when it carries no id.
        """
        rid = incoming.context.request_id
        future: asyncio.Future[Outcome] | None = None
        cache = self._cache if incoming.is_call else self._cast_cache
        if key:
            cached = cache.get(key)
            if cached is not None:
                self.stats.duplicates += 1
                LOG.info(
                    "Redelivered %s (request_id=%s, unique_id=%s): answering from cache",
                    incoming.method,
                    rid,
                    incoming.unique_id,
                )
                await self._finish(message, incoming, cached)
                return
            running = self._inflight.get(key)
            if running is not None:
                self.stats.duplicates += 1
                LOG.info(
                    "Redelivered %s (request_id=%s) is still running; waiting for it",
                    incoming.method,
                    rid,
                )
                await self._finish(message, incoming, await asyncio.shield(running))
                return
            future = asyncio.get_running_loop().create_future()
            self._inflight[key] = future
        started = time.perf_counter()
        try:
            outcome = await self._execute(incoming)
        except _NotStarted:
            if future is not None and not future.done():
                future.cancel()
            self.stats.handed_back += 1
            with contextlib.suppress(Exception):
                await message.reject(requeue=True)  # another scheduler takes it now
            return
        except BaseException:
            if future is not None and not future.done():
                future.cancel()
            raise
        finally:
            if key:
                self._inflight.pop(key, None)
        if key:
            cache.put(key, outcome, size=outcome.approx_bytes())
        if future is not None and not future.done():
            future.set_result(outcome)
        replying = time.perf_counter()
        await self._finish(message, incoming, outcome)
        if incoming.is_call and outcome.kind != "refused":
            done = time.perf_counter()
            self._recorder.rpc_call(incoming.method, outcome.kind, done - started)
            if incoming.method == "select_destinations":
                self._recorder.phase("reply", done - replying)

    async def _finish(
        self, message: AbstractIncomingMessage, incoming: wire.IncomingMessage, outcome: Outcome
    ) -> None:
        """Reply (calls only), then ack: the request leaves RabbitMQ only once answered."""
        if incoming.address is not None:
            await self._send_reply(incoming.address, outcome, incoming.context.request_id)
        await self._ack(message)

    async def _refuse(self, message: AbstractIncomingMessage, exc: wire.MalformedMessage) -> None:
        self.stats.malformed += 1
        if exc.address is not None:
            LOG.warning(
                "Malformed call (msg_id=%s): %s", exc.address.msg_id, wire.brief(exc.reason)
            )
            await self._send_reply(exc.address, Outcome(failure=wire.malformed_failure(exc.reason)))
            await self._ack(message)
            return
        LOG.warning(
            "Rejected a malformed message with no reply address: %s", wire.brief(exc.reason)
        )
        with contextlib.suppress(Exception):
            await message.reject(requeue=False)

    async def _ack(self, message: AbstractIncomingMessage) -> None:
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
            LOG.warning("No such RPC method %r (request_id=%s)", wire.brief(incoming.method), rid)
            return Outcome(failure=wire.no_such_method(incoming.method), kind="refused")
        except dispatcher.UnsupportedVersion:
            LOG.warning(
                "Unsupported RPC version %s for %r (request_id=%s)",
                incoming.version,
                incoming.method,
                rid,
            )
            return Outcome(
                failure=wire.unsupported_version(incoming.version, incoming.method), kind="refused"
            )
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
                if self._draining and incoming.is_call:
                    raise _NotStarted
                self._active_calls += incoming.is_call
                try:
                    handler = self._methods[endpoint.name][incoming.method]
                    result = await handler(incoming)
                finally:
                    self._active_calls -= incoming.is_call
            self.stats.ok += 1
            return Outcome(result=result)
        except _NotStarted:
            raise
        except NoValidHost as exc:
            LOG.info("NoValidHost for request_id=%s: %s", rid, exc.message)
            self.stats.no_valid_host += 1
            return Outcome(failure=wire.nova_failure(exc), kind="no_valid_host")
        except NovaException as exc:
            LOG.warning("%s for request_id=%s: %s", type(exc).__name__, rid, exc.message)
            self.stats.nova_errors += 1
            return Outcome(failure=wire.nova_failure(exc), kind="error")
        except CodecError as exc:
            LOG.warning(
                "Malformed %s (request_id=%s): %s", incoming.method, rid, wire.brief(str(exc))
            )
            self.stats.malformed += 1
            return Outcome(failure=wire.malformed_failure(str(exc)), kind="error")
        except Exception:
            LOG.exception("Error in %s (request_id=%s)", incoming.method, rid)
            self.stats.errors += 1
            return Outcome(failure=wire.internal_failure(rid), kind="error")
        finally:
            await cancel_and_wait(heartbeat)

    # ---------------------------------------------------------------------------------------
    # Replies out.

    async def _heartbeats(self, address: wire.ReplyAddress, interval: float) -> None:
        """oslo's call-monitor watchdog: ``ending: false`` every ``_timeout/2`` seconds."""
        while True:
            await asyncio.sleep(interval)
            await self._link.publish(
                address.reply_q, wire.heartbeat_body(address.msg_id), retry=0.0
            )
            self.stats.heartbeats += 1

    async def _send_reply(
        self, address: wire.ReplyAddress, outcome: Outcome, request_id: str | None = None
    ) -> None:
        """One attempt now; if the broker returns it (or is away) retry in the background."""
        try:
            body = await paced.reply_body(address.msg_id, outcome.result, outcome.failure, Pacer())
        except (TypeError, ValueError, RecursionError):
            LOG.exception("Reply of request_id=%s cannot be serialised", request_id)
            failure = wire.internal_failure(request_id)
            body = wire.reply_body(address.msg_id, None, failure, ending=True)
        if await self._link.publish(address.reply_q, body, retry=0.0):
            self.stats.replies += 1
        else:
            self._late.retry(address.reply_q, body, request_id)


class _NotStarted(AsyncschedError):
    """A held call reached a slot after drain began: it goes back to RabbitMQ unanswered."""


def _digest(body: bytes) -> str:
    """What tells a redelivery (same bytes) from another request reusing its ``_unique_id``."""
    return hashlib.blake2b(body, digest_size=16).hexdigest()
