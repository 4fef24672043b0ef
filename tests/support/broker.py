"""The local RabbitMQ for tests, benchmarks and the demo: rabbitmqctl and throwaway vhosts.

The ``scheduler`` queue name is fixed by nova, so runs side by side in one vhost would steal
each other's calls; a uuid-named vhost isolates them and is deleted afterwards (with every
queue and exchange in it). Plain functions, no pytest: the fixtures are in
``tests/integration/conftest.py``.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from asyncsched.conf.options import (
    AsyncschedOptions,
    Config,
    DefaultOptions,
    OsloMessagingRabbitOptions,
)

RABBITMQCTL = "rabbitmqctl"


def rabbitmqctl(*args: str) -> str:
    done = subprocess.run(
        [RABBITMQCTL, "-q", *args], capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def list_json(what: str, vhost: str, *columns: str) -> list[dict[str, Any]]:
    out = rabbitmqctl(what, "-p", vhost, *columns, "--formatter", "json")
    rows: list[dict[str, Any]] = json.loads(out or "[]")
    return rows


def close_connections(connection_name: str, reason: str = "test: forced close") -> int:
    """Close, broker side, every connection whose client connection_name matches."""
    rows = json.loads(
        rabbitmqctl("list_connections", "name", "client_properties", "--formatter", "json") or "[]"
    )
    names = set()
    for row in rows:
        props = {p[0]: p[2] for p in row.get("client_properties", [])}
        if props.get("connection_name") == connection_name:
            names.add(row["name"])
    # The JSON pid is not in the form close_connection accepts; the tab listing's is.
    closed = 0
    for line in rabbitmqctl("list_connections", "pid", "name").splitlines():
        pid, _, name = line.partition("\t")
        if name in names:
            rabbitmqctl("close_connection", pid, reason)
            closed += 1
    return closed


def add_vhost(name: str) -> None:
    """Create vhost ``name`` with full permissions for guest."""
    rabbitmqctl("add_vhost", name)
    rabbitmqctl("set_permissions", "-p", name, "guest", ".*", ".*", ".*")


def delete_vhost(name: str) -> None:
    """Delete vhost ``name`` and everything in it; never raises (cleanup path)."""
    subprocess.run([RABBITMQCTL, "-q", "delete_vhost", name], capture_output=True, timeout=60)


@contextmanager
def throwaway_vhost(prefix: str) -> Iterator[str]:
    """A uuid-named vhost ``<prefix>-<hex>`` for the block, deleted afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:12]}"
    try:
        add_vhost(name)
        yield name
    finally:
        delete_vhost(name)


def amqp_url(vhost: str) -> str:
    """The transport_url of the local broker's ``vhost`` (guest/guest)."""
    return f"rabbit://guest:guest@127.0.0.1:5672/{vhost}"


def make_config(
    url: str,
    host: str = "sched-test",
    max_concurrent: int = 16,
    max_held: int = 1000,
    **rabbit: Any,
) -> Config:
    """An asyncsched config for broker ``url`` that reconnects quickly (tests, bench)."""
    return Config(
        default=replace(DefaultOptions(), transport_url=url, host=host),
        oslo_messaging_rabbit=replace(
            OsloMessagingRabbitOptions(),
            rabbit_retry_interval=0.2,
            rabbit_retry_backoff=0.2,
            kombu_reconnect_delay=0.2,
            **rabbit,
        ),
        asyncsched=replace(
            AsyncschedOptions(),
            max_concurrent_requests=max_concurrent,
            max_held_requests=max_held,
        ),
    )
