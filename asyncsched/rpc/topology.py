"""The exchanges, queues and bindings an oslo RPC server declares, derived as oslo derives them.

Declaring anything with different durable/auto_delete/arguments than the deployment's existing
entities makes RabbitMQ close the channel with 406 PRECONDITION_FAILED, so the flags come from
``[oslo_messaging_rabbit]`` exactly as ``impl_rabbit`` computes them (``_get_queue_arguments``,
``Connection.durable``, ``declare_topic_consumer``, ``declare_fanout_consumer``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from asyncsched.conf.options import OsloMessagingRabbitOptions
from asyncsched.exceptions import ConfigError


@dataclass(frozen=True, slots=True)
class ExchangeDecl:
    name: str
    type: str  # "topic" | "fanout"
    durable: bool
    auto_delete: bool


@dataclass(frozen=True, slots=True)
class QueueDecl:
    """A queue, its binding to ``exchange`` with ``routing_key``, and consumer arguments."""

    name: str
    durable: bool
    auto_delete: bool
    arguments: Mapping[str, Any]
    exchange: ExchangeDecl
    routing_key: str
    consumer_arguments: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Topology:
    control_exchange: ExchangeDecl
    fanout_exchange: ExchangeDecl
    queues: tuple[QueueDecl, ...]


def queue_arguments(
    rabbit: OsloMessagingRabbitOptions, *, quorum: bool, ttl: int, stream: bool = False
) -> dict[str, Any]:
    """oslo's ``_get_queue_arguments`` for one queue, step by step."""
    if rabbit.rabbit_quorum_queue and rabbit.rabbit_ha_queues:
        raise ConfigError(
            "[oslo_messaging_rabbit] rabbit_quorum_queue and rabbit_ha_queues are both enabled; "
            "a queue is quorum or mirrored, not both"
        )
    args: dict[str, Any] = {}
    if rabbit.rabbit_ha_queues:
        args["x-ha-policy"] = "all"
    if quorum:
        args["x-queue-type"] = "quorum"
        if rabbit.rabbit_quorum_delivery_limit:
            args["x-delivery-limit"] = rabbit.rabbit_quorum_delivery_limit
        if rabbit.rabbit_quorum_max_memory_length:
            args["x-max-in-memory-length"] = rabbit.rabbit_quorum_max_memory_length
        if rabbit.rabbit_quorum_max_memory_bytes:
            args["x-max-in-memory-bytes"] = rabbit.rabbit_quorum_max_memory_bytes
    if ttl > 0:
        args["x-expires"] = ttl * 1000
    if stream:
        args = {"x-queue-type": "stream"}
        if ttl > 0:
            args["x-max-age"] = f"{ttl}s"
    return args


def prefetch_count(rabbit: OsloMessagingRabbitOptions, max_concurrent: int) -> int:
    """basic.qos per consumer: the operator's rabbit_qos_prefetch_count, else our concurrency."""
    return rabbit.rabbit_qos_prefetch_count or max_concurrent


def build_topology(
    rabbit: OsloMessagingRabbitOptions,
    *,
    control_exchange: str,
    topic: str,
    server: str,
    fanout_suffix: str | None = None,
) -> Topology:
    """Everything ``AMQPDriverBase.listen(Target(topic, server))`` declares."""
    if rabbit.rabbit_stream_fanout and not (
        rabbit.rabbit_transient_quorum_queue and rabbit.rabbit_qos_prefetch_count > 0
    ):
        raise ConfigError(
            "[oslo_messaging_rabbit] rabbit_stream_fanout needs rabbit_transient_quorum_queue=True "
            "and rabbit_qos_prefetch_count > 0"
        )
    durable = rabbit.amqp_durable_queues or rabbit.rabbit_quorum_queue
    control = ExchangeDecl(control_exchange, "topic", durable, rabbit.amqp_auto_delete)
    topic_args = queue_arguments(rabbit, quorum=rabbit.rabbit_quorum_queue, ttl=0)
    cancel_args = {"x-cancel-on-ha-failover": True} if rabbit.enable_cancel_on_failover else {}
    queues = [
        QueueDecl(
            name=name,
            durable=durable,
            auto_delete=rabbit.amqp_auto_delete,
            arguments=topic_args,
            exchange=control,
            routing_key=name,
            consumer_arguments=cancel_args,
        )
        for name in (topic, f"{topic}.{server}")
    ]
    stream = rabbit.rabbit_stream_fanout
    fanout_durable = rabbit.rabbit_transient_quorum_queue or stream
    fanout = ExchangeDecl(f"{topic}_fanout", "fanout", fanout_durable, True)
    if stream:
        fanout_name = f"{topic}_fanout"
        consumer_args: dict[str, Any] = {**cancel_args, "x-stream-offset": "last"}
    else:
        fanout_name = f"{topic}_fanout_{fanout_suffix or uuid.uuid4().hex}"
        consumer_args = dict(cancel_args)
    queues.append(
        QueueDecl(
            name=fanout_name,
            durable=fanout_durable,
            auto_delete=False,
            arguments=queue_arguments(
                rabbit,
                quorum=rabbit.rabbit_transient_quorum_queue,
                ttl=rabbit.rabbit_transient_queues_ttl,
                stream=stream,
            ),
            exchange=fanout,
            routing_key=topic,
            consumer_arguments=consumer_args,
        )
    )
    return Topology(control_exchange=control, fanout_exchange=fanout, queues=tuple(queues))
