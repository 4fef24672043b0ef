"""The oslo.messaging wire: nova's scheduler RPC API served over RabbitMQ with aio-pika."""

from asyncsched.rpc.interfaces import HostStateEvents, SchedulerAPI
from asyncsched.rpc.server import RPCServer

__all__ = ["HostStateEvents", "RPCServer", "SchedulerAPI"]
