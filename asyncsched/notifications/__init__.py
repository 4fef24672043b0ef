"""Notifications nova-scheduler emits (``scheduler.select_destinations.start``/``.end``).

``build_notifier(config)`` gives the notifier the scheduler manager is handed: it publishes on
``[oslo_messaging_notifications] transport_url`` (else the RPC one) when a driver is set, and
sends nothing with nova's default (no driver, or ``noop``).
"""

from __future__ import annotations

from asyncsched.conf.options import Config
from asyncsched.conf.transport_url import parse_transport_url
from asyncsched.notifications.amqp import AmqpPublisher
from asyncsched.notifications.notifier import NoopNotifier, Publisher, SchedulerNotifier

__all__ = ["NoopNotifier", "SchedulerNotifier", "build_notifier"]


def build_notifier(config: Config) -> SchedulerNotifier:
    """The configured notifier; ConfigError for a driver or transport URL it cannot use."""
    text = config.oslo_messaging_notifications.transport_url or config.default.transport_url
    url = parse_transport_url(text)

    def publisher() -> Publisher:
        return AmqpPublisher(url, config.oslo_messaging_rabbit, config.default.control_exchange)

    return SchedulerNotifier(config, publisher)
