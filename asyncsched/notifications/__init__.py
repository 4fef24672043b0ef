"""Notifications nova-scheduler emits (``scheduler.select_destinations.start``/``.end``).

``build_notifier(config)`` gives the notifier the scheduler manager is handed: it publishes on
``[oslo_messaging_notifications] transport_url`` (else the RPC one) when a driver is set, and
sends nothing with nova's default (no driver, or ``noop``).
"""

from __future__ import annotations

import ssl

from asyncsched.conf.options import Config
from asyncsched.notifications.amqp import AmqpPublisher
from asyncsched.notifications.notifier import NoopNotifier, Publisher, SchedulerNotifier
from asyncsched.rpc.transport_url import TransportURL, parse_transport_url

__all__ = ["NoopNotifier", "SchedulerNotifier", "build_notifier"]


def _ssl_context(config: Config, url: TransportURL) -> ssl.SSLContext | None:
    """TLS to the broker as kombu does it: verify only with a CA file, never the name."""
    rabbit = config.oslo_messaging_rabbit
    if not (rabbit.ssl or url.ssl):
        return None
    ctx = ssl.create_default_context(cafile=rabbit.ssl_ca_file)
    ctx.check_hostname = False
    if not rabbit.ssl_ca_file:
        ctx.verify_mode = ssl.CERT_NONE
    if rabbit.ssl_cert_file:
        ctx.load_cert_chain(rabbit.ssl_cert_file, rabbit.ssl_key_file)
    return ctx


def build_notifier(config: Config) -> SchedulerNotifier:
    """The configured notifier; ConfigError for a driver or transport URL it cannot use."""
    text = config.oslo_messaging_notifications.transport_url or config.default.transport_url
    url = parse_transport_url(text)

    def publisher() -> Publisher:
        return AmqpPublisher(
            url,
            config.oslo_messaging_rabbit,
            config.default.control_exchange,
            ssl_context=_ssl_context(config, url),
        )

    return SchedulerNotifier(config, publisher)
