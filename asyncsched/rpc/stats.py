"""The RPC layer's message counters: ``RPCCounters`` (incremented) and ``RPCStats`` (read).

Why: ``RPCHealth.stats`` feeds the admin metrics. Counted and read by attribute
(``stats.received += 1``, ``lambda h: h.stats.received``), a misspelt counter is a mypy error,
not a metric that silently stays missing. Every counter is in the snapshot from the start, at 0.

The field list is written once, on ``RPCCounters``. ``RPCStats`` is made from those fields as a
frozen :class:`~asyncsched.common.health.Snapshot` (its JSON is one key per counter). The
standard library cannot derive a frozen dataclass from a mutable one, so the class is built
with ``make_dataclass``; mypy is shown the same class declared directly.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from asyncsched.common.health import Snapshot


@dataclass(slots=True)
class RPCCounters:
    """What ``RPCServer``, ``BrokerLink`` and ``LateReplies`` count, shared by the three."""

    received: int = 0  # messages taken from RabbitMQ
    redelivered: int = 0  # ... of which RabbitMQ redelivered
    over_held_bytes: int = 0  # messages handed back unread: over the held-bytes budget
    malformed: int = 0  # requests refused as malformed
    duplicates: int = 0  # redeliveries answered from the cache or a running twin
    handed_back: int = 0  # held calls returned to RabbitMQ while draining
    flow_pauses: int = 0  # consumers paused for the held-bytes budget
    errors: int = 0  # messages that hit an internal error
    ok: int = 0  # calls answered with a result
    no_valid_host: int = 0  # ... with NoValidHost
    nova_errors: int = 0  # ... with another nova exception
    heartbeats: int = 0  # call-monitor heartbeats sent
    replies: int = 0  # replies the broker confirmed (late ones included)
    replies_late: int = 0  # ... of which after a retry in the background
    replies_dropped: int = 0  # replies given up (retry time over, or too many pending)
    publish_retries: int = 0  # publishes retried (returned, or the connection lost)
    reconnects: int = 0  # connections to RabbitMQ re-established

    def snapshot(self) -> RPCStats:
        """The counters now, frozen."""
        return RPCStats(**dataclasses.asdict(self))


if TYPE_CHECKING:

    @dataclass(frozen=True, slots=True)
    class RPCStats(RPCCounters, Snapshot):  # type: ignore[misc]  # frozen twin, see above
        """``RPCHealth.stats``: the counters at one moment."""

else:
    RPCStats = dataclasses.make_dataclass(
        "RPCStats",
        [(f.name, f.type, f.default) for f in dataclasses.fields(RPCCounters)],
        bases=(Snapshot,),
        frozen=True,
        slots=True,
    )
    RPCStats.__module__ = __name__
    RPCStats.__doc__ = """``RPCHealth.stats``: the counters at one moment."""
