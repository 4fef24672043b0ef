"""Assembly of the real daemon: which components ``asyncsched serve`` runs, in which order.

The components (host-state cache, Placement client, scheduler, AMQP RPC server) are written in
their own packages; the lead wires them here in start order: host state -> Placement -> AMQP
consumers. Until then the service starts with what exists, so ``serve`` already shows the
whole lifecycle (ready, watchdog, reload, drain) under systemd.
"""

from __future__ import annotations

from asyncsched.conf.loader import ConfigSources
from asyncsched.conf.options import Config
from asyncsched.notify import SystemdNotifier
from asyncsched.service import Component, Service


def build_components(config: Config) -> list[Component]:
    """The daemon's components in start order (none are wired yet: the lead adds them)."""
    return []


def build_service(
    config: Config,
    sources: ConfigSources,
    notifier: SystemdNotifier | None = None,
) -> Service:
    """The Service ``asyncsched serve`` runs: real components, notifier from the environment."""
    return Service(
        config,
        build_components(config),
        notifier if notifier is not None else SystemdNotifier.from_env(),
        sources,
    )
