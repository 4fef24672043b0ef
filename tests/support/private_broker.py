"""A RabbitMQ node of the test's own, for tests that stop and restart the broker.

The shared RabbitMQ (127.0.0.1:5672) serves every engineer's and CI's tests at once; stopping it
breaks their runs. A private node runs from a temporary directory on free ports under its own
node name, so ``stop_app`` / ``start_app`` / ``stop`` touch nobody else. Starting one takes a
few seconds. Plain functions and a context manager, no pytest.

Recipe: the server drops to the ``rabbitmq`` user, so that user owns the directory; no plugins;
``loopback_users = none`` only (listeners come from ``RABBITMQ_NODE_PORT``: set in both places,
``start_app`` after ``stop_app`` failed with eaddrinuse); the distribution port is a free one,
never 25672 (the shared node's). Logs stay in the directory while the node runs: read them when
something fails (``log_text``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port

RABBITMQ_SERVER = "rabbitmq-server"
RABBITMQCTL = "rabbitmqctl"


@dataclass(frozen=True)
class PrivateBroker:
    """A running private node: ``guest``/``guest`` on ``127.0.0.1:port``, vhost ``/``."""

    node: str
    port: int
    dist_port: int
    base: Path

    def url(self, vhost: str = "") -> str:
        """An oslo ``transport_url`` (an empty vhost is RabbitMQ's default ``/``)."""
        return f"rabbit://guest:guest@127.0.0.1:{self.port}/{vhost}"

    def amqp_url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}/"

    def ctl(self, *args: str, timeout: float = 60) -> str:
        done = subprocess.run(
            [RABBITMQCTL, "-n", self.node, "-q", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
        return done.stdout

    def await_startup(self, limit: float = 60.0) -> None:
        """``await_startup`` fails (rc 69) until the node registered with epmd: retry."""
        deadline = time.monotonic() + limit
        while True:
            try:
                self.ctl("await_startup", timeout=limit)
                return
            except subprocess.CalledProcessError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.node} did not start:\n{self.log_text()}") from None
                time.sleep(0.3)

    def stop_app(self) -> None:
        self.ctl("stop_app")

    def start_app(self) -> None:
        self.ctl("start_app")

    def log_text(self) -> str:
        logs = sorted((self.base / "log").glob("*.log"))
        return "\n".join(p.read_text(errors="replace")[-4000:] for p in logs)


def _environment(node: str, port: int, dist_port: int, base: Path) -> dict[str, str]:
    (base / "enabled_plugins").write_text("[].\n")
    (base / "rabbitmq.conf").write_text("loopback_users = none\n")
    for sub in ("mnesia", "log"):
        (base / sub).mkdir()
    shutil.chown(base, "rabbitmq", "rabbitmq")
    for path in base.rglob("*"):
        shutil.chown(path, "rabbitmq", "rabbitmq")
    return {
        **os.environ,
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(base / "mnesia"),
        "RABBITMQ_LOG_BASE": str(base / "log"),
        "RABBITMQ_PID_FILE": str(base / "rabbit.pid"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(base / "enabled_plugins"),
        "RABBITMQ_CONFIG_FILE": str(base / "rabbitmq.conf"),
    }


@contextlib.contextmanager
def private_broker() -> Iterator[PrivateBroker]:
    """Start a private node, yield it running, stop it and remove its directory afterwards."""
    base = Path(tempfile.mkdtemp(prefix="asyncsched-rabbit-"))
    broker = PrivateBroker(
        node=f"rabbit-{uuid.uuid4().hex[:10]}@localhost",
        port=free_port(),
        dist_port=free_port(),
        base=base,
    )
    env = _environment(broker.node, broker.port, broker.dist_port, base)
    try:
        subprocess.run(
            [RABBITMQ_SERVER, "-detached"], env=env, check=True, timeout=60, capture_output=True
        )
        broker.await_startup()
        yield broker
    finally:
        try:
            subprocess.run(
                [RABBITMQCTL, "-n", broker.node, "-q", "stop", str(base / "rabbit.pid")],
                capture_output=True,
                timeout=60,
            )
        finally:
            shutil.rmtree(base, ignore_errors=True)
