"""Publishing notification bodies on RabbitMQ with aio-pika, as oslo's rabbit driver does.

``notify_send``: the control exchange (topic, durable/auto-delete from
``[oslo_messaging_rabbit]``), and before the first message to a routing key the "default
queue" named after it, bound to it, so notifications wait for a consumer that comes later.
"""

from __future__ import annotations

import logging
from typing import Any

import aio_pika

from asyncsched.conf.options import OsloMessagingRabbitOptions
from asyncsched.conf.transport_url import TransportURL
from asyncsched.rpc import wire
from asyncsched.rpc.broker import CONNECT_TIMEOUT, open_connection
from asyncsched.rpc.topology import queue_arguments

LOG = logging.getLogger(__name__)


class AmqpPublisher:
    """One connection with a confirming channel, opened on the first publish."""

    def __init__(
        self, url: TransportURL, rabbit: OsloMessagingRabbitOptions, exchange: str
    ) -> None:
        self._url = url
        self._rabbit = rabbit
        self._exchange_name = exchange
        self._connection: Any = None
        self._exchange: Any = None
        self._declared: set[str] = set()

    async def _open(self) -> None:
        last: Exception | None = None
        for host in self._url.hosts:  # failover order, as in the transport URL
            try:
                self._connection = await open_connection(
                    self._rabbit, self._url, host, "asyncsched notifications"
                )
                break
            except Exception as exc:
                LOG.warning("notifications: RabbitMQ %s: %s", host.redacted(), exc)
                last = exc
        else:
            raise ConnectionError(f"no notification broker reachable: {last}")
        channel = await self._connection.channel(publisher_confirms=True)
        self._exchange = await channel.declare_exchange(
            self._exchange_name,
            aio_pika.ExchangeType.TOPIC,
            durable=self._rabbit.amqp_durable_queues,
            auto_delete=self._rabbit.amqp_auto_delete,
        )
        self._declared = set()

    async def _declare_default_queue(self, routing_key: str) -> None:
        channel = self._exchange.channel
        queue = await channel.declare_queue(
            routing_key,
            durable=self._rabbit.amqp_durable_queues,
            auto_delete=self._rabbit.amqp_auto_delete,
            arguments=queue_arguments(self._rabbit, quorum=self._rabbit.rabbit_quorum_queue, ttl=0)
            or None,
        )
        await queue.bind(self._exchange, routing_key=routing_key)
        self._declared.add(routing_key)

    async def publish(self, routing_key: str, body: bytes) -> None:
        if self._connection is None or self._connection.is_closed:
            await self._open()
        if routing_key not in self._declared:
            await self._declare_default_queue(routing_key)
        await self._exchange.publish(
            aio_pika.Message(
                body,
                content_type=wire.CONTENT_TYPE,
                content_encoding=wire.CONTENT_ENCODING,
                delivery_mode=aio_pika.DeliveryMode.PERSISTENT
                if self._rabbit.amqp_durable_queues
                else aio_pika.DeliveryMode.NOT_PERSISTENT,
            ),
            routing_key=routing_key,
            timeout=CONNECT_TIMEOUT,
        )

    async def close(self) -> None:
        connection, self._connection = self._connection, None
        self._exchange = None
        if connection is not None and not connection.is_closed:
            await connection.close()
