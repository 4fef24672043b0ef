"""``asyncsched serve`` as systemd runs it: READY, WATCHDOG, reload, STOPPING, exit 0."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import broker
from tests.support.notify_listener import NotifyListener
from tests.support.nova_db import NovaDB
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "tests" / "unit" / "conf" / "fixtures" / "nova.conf"


@pytest.fixture
def local_stack(tmp_path: Path) -> Iterator[str]:
    """Overrides pointing the operator's nova.conf at a real local stack (the daemon is the
    real one: it needs RabbitMQ, a nova API database and Placement to become READY)."""
    vhost = f"asyncsched-serve-{uuid.uuid4().hex[:12]}"
    placement = PlacementServer(workers=1)
    db = NovaDB(prefix="asyncsched_serve")
    loop = asyncio.new_event_loop()  # NovaDB's pools live on the loop that created them
    try:
        broker.add_vhost(vhost)
        loop.run_until_complete(db.create(n_cells=1))
        placement.start()
        # The operator's third-party filter (available_filters = custom_filters.gpu.GpuFilter)
        # is importable on their scheduler host; here too. AvailabilityZoneFilter left nova
        # (the AZ is a Placement pre-filter now), so the override drops it from the list.
        plugin = tmp_path / "plugins" / "custom_filters"
        plugin.mkdir(parents=True)
        (plugin / "__init__.py").write_text("")
        (plugin / "gpu.py").write_text(
            "from asyncsched.scheduling.filters.base import BaseHostFilter\n\n\n"
            "class GpuFilter(BaseHostFilter):\n"
            "    name = 'GpuFilter'\n\n"
            "    def host_passes(self, host, spec):\n"
            "        return None\n"
        )
        yield (
            f"[DEFAULT]\ntransport_url = {broker.amqp_url(vhost)}\n"
            f"[api_database]\nconnection = {db.api_url}\n"
            f"[placement]\nauth_type = none\nendpoint_override = {placement.url}\n"
            "[filter_scheduler]\nenabled_filters = ComputeFilter,ComputeCapabilitiesFilter,"
            "ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,"
            "AggregateInstanceExtraSpecsFilter,PciPassthroughFilter,NUMATopologyFilter,GpuFilter\n"
        )
    finally:
        placement.stop()
        loop.run_until_complete(db.drop())
        loop.close()
        broker.delete_vhost(vhost)


def test_serve_speaks_the_notify_protocol_and_stops_cleanly(
    tmp_path: Path, local_stack: str
) -> None:
    extra = tmp_path / "asyncsched.conf"
    extra.write_text(local_stack + "[DEFAULT]\ndebug = true\n[asyncsched]\ndrain_timeout = 5\n")
    with NotifyListener() as listener:
        env = dict(
            os.environ,
            NOTIFY_SOCKET=listener.address,
            WATCHDOG_USEC="200000",
            PYTHONUNBUFFERED="1",
            PYTHONPATH=str(tmp_path / "plugins"),
        )
        cmd = [sys.executable, "-m", "asyncsched", "serve"]
        cmd += ["--config-file", str(FIXTURE), "--config-file", str(extra)]
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
        try:
            ready = listener.wait_for("READY", "1")
            assert ready["MAINPID"] == str(proc.pid)
            listener.wait_for("WATCHDOG", "1")
            listener.wait_for("WATCHDOG", "1")
            proc.send_signal(signal.SIGHUP)
            listener.wait_for("RELOADING", "1")
            listener.wait_for("READY", "1")
            proc.send_signal(signal.SIGTERM)
            listener.wait_for("STOPPING", "1")
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert f"config files: {FIXTURE}, {extra}" in err
    # A nova.conf full of options we do not use: one debug line for each, nothing worse.
    assert "DEBUG asyncsched.cli [-] ignoring section [keystone_authtoken]" in err
    assert "ignoring option [DEFAULT] my_ip" in err
    assert " ERROR " not in err and " WARNING " not in err
    # Secrets of the fixture never reach the log.
    for secret in ("Rabb1tPa55", "N0vaDbPass", "Ap1DbPass", "K3yst0nePass", "Pl@cement Pass"):
        assert secret not in err
    assert all(line[:4].isdigit() for line in err.splitlines())  # one line per event
