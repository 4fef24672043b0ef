"""The REAL oslo.messaging notification listener, as ceilometer or a nova test consumes them.

``get_notification_listener`` on ``targets`` (topics on the control exchange ``nova``) with an
endpoint that records every ``info`` call: (ctxt, publisher_id, event_type, payload, metadata).
oslo.messaging decodes the envelope (or the 1.0 bare message) and the ``_context_*`` keys.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import oslo_messaging as messaging

from tests.support.oslo_caller import _conf


class _Endpoint:
    def __init__(self) -> None:
        self.received: list[tuple[dict[str, Any], str, str, Any, dict[str, Any]]] = []
        self.cond = threading.Condition()

    def info(
        self, ctxt: dict[str, Any], publisher_id: str, event_type: str, payload: Any, metadata: Any
    ) -> None:
        with self.cond:
            self.received.append((ctxt, publisher_id, event_type, payload, dict(metadata)))
            self.cond.notify_all()


class NotificationListener:
    """Start on ``url`` listening to ``topics``; ``wait_for(n)`` returns what arrived."""

    def __init__(self, url: str, topics: Sequence[str]) -> None:
        self.transport = messaging.get_notification_transport(_conf(), url=url)
        self.endpoint = _Endpoint()
        targets = [messaging.Target(topic=t) for t in topics]
        self.listener = messaging.get_notification_listener(
            self.transport, targets, [self.endpoint], executor="threading"
        )
        self.listener.start()

    def wait_for(
        self, count: int, timeout: float = 30.0
    ) -> list[tuple[dict[str, Any], str, str, Any, dict[str, Any]]]:
        deadline = time.monotonic() + timeout
        with self.endpoint.cond:
            while len(self.endpoint.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.endpoint.cond.wait(left)
            return list(self.endpoint.received)

    def close(self) -> None:
        self.listener.stop()
        self.listener.wait()
        self.transport.cleanup()
