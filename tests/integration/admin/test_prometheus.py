"""contrib/prometheus, for real: promtool checks the alert rules and runs their unit tests
(one scheduler of three down included), and a real Prometheus scrapes a running
``asyncsched serve`` with the scrape job of contrib/prometheus/prometheus.yml.

``prometheus`` and ``promtool`` come from Debian's ``prometheus`` package, which
tools/services.sh (run by ``make test``) installs when missing."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from tests.support.cloud import daemon_config
from tests.support.daemon import serving, write_config
from tests.support.net import free_port
from tests.support.nova_db import NovaDB
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
CONTRIB = ROOT / "contrib" / "prometheus"
TOKEN = "t0ken-prometheus-sends"


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is not installed: run tools/services.sh (make test does)"
    return path


def test_promtool_checks_the_alert_rules() -> None:
    proc = subprocess.run(
        [tool("promtool"), "check", "rules", str(CONTRIB / "alerts.yml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


def test_promtool_runs_the_alert_rule_tests() -> None:
    tests = yaml.safe_load((CONTRIB / "alerts_test.yml").read_text())
    # One scheduler of three down must be among the cases.
    instances = {
        s["series"].split('instance="')[1].split('"')[0]
        for case in tests["tests"]
        for s in case["input_series"]
        if s["series"].startswith('up{job="asyncsched"')
    }
    assert len(instances) >= 3
    proc = subprocess.run(
        [tool("promtool"), "test", "rules", "alerts_test.yml"],
        cwd=CONTRIB,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def serve_admin(
    module_amqp_url: str,
    placement_server: PlacementServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[str, Path]]:
    """A running ``asyncsched serve`` with its admin endpoint (token) on a free port."""
    tmp = tmp_path_factory.mktemp("prom-serve")
    db = NovaDB(prefix="asyncsched_prom")
    await db.create(n_cells=1)
    try:
        port = free_port()
        config = daemon_config(
            transport_url=module_amqp_url,
            api_url=db.api_url,
            placement=replace(placement_server.options, timeout=5.0),
            scheduler_host=f"prom-{uuid.uuid4().hex[:8]}",
            refresh_interval=3600.0,
            full_resync_interval=3600.0,
            drain_timeout=5.0,
            admin_listen=f"127.0.0.1:{port}",
        )
        async with serving(write_config(tmp, config, admin_token=TOKEN)):
            yield f"127.0.0.1:{port}", tmp / "token"
    finally:
        await db.drop()


def scrape_config(target: str, token_file: Path, rules: Path) -> dict[str, Any]:
    """contrib/prometheus/prometheus.yml, pointed at this test's daemon, every second."""
    conf: dict[str, Any] = yaml.safe_load((CONTRIB / "prometheus.yml").read_text())
    (job,) = conf["scrape_configs"]
    job["scrape_interval"] = "1s"
    job["authorization"]["credentials_file"] = str(token_file)
    job["static_configs"] = [{"targets": [target]}]
    conf["rule_files"] = [str(rules)]
    return conf


@contextlib.contextmanager
def running_prometheus(conf: Path, tmp_path: Path) -> Iterator[tuple[str, Callable[[], bool]]]:
    """Prometheus on a free port with its data in ``tmp_path``; stopped after."""
    web = f"127.0.0.1:{free_port()}"
    with (tmp_path / "prometheus.log").open("wb") as log:
        proc = subprocess.Popen(
            [
                tool("prometheus"),
                f"--config.file={conf}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address={web}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            yield f"http://{web}", lambda: proc.poll() is None
        finally:
            proc.terminate()
            proc.wait(30)


async def query(session: aiohttp.ClientSession, base: str, promql: str) -> list[dict[str, Any]]:
    async with session.get(f"{base}/api/v1/query", params={"query": promql}) as resp:
        body = json.loads(await resp.text())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


@pytest.mark.asyncio(loop_scope="module")
async def test_a_real_prometheus_scrapes_a_running_asyncsched(
    serve_admin: tuple[str, Path], tmp_path: Path
) -> None:
    target, token_file = serve_admin
    conf = tmp_path / "prometheus.yml"
    conf.write_text(yaml.safe_dump(scrape_config(target, token_file, CONTRIB / "alerts.yml")))
    with running_prometheus(conf, tmp_path) as (base, alive):
        async with aiohttp.ClientSession() as session:
            found: dict[str, list[dict[str, Any]]] = {}
            async with asyncio.timeout(60):
                while True:
                    assert alive(), (tmp_path / "prometheus.log").read_text()
                    try:
                        for promql in (
                            'up{job="asyncsched"}',
                            "asyncsched_up",
                            "process_cpu_seconds_total",
                        ):
                            found[promql] = await query(session, base, promql)
                    except aiohttp.ClientError:
                        found = {}
                    if found and all(found.values()):
                        break
                    await asyncio.sleep(0.5)
            async with session.get(f"{base}/api/v1/rules") as resp:
                rules = json.loads(await resp.text())
    (up,) = found['up{job="asyncsched"}']
    assert up["metric"]["instance"] == target and up["value"][1] == "1"
    assert [s["value"][1] for s in found["asyncsched_up"]] == ["1"]
    assert found["process_cpu_seconds_total"][0]["metric"]["instance"] == target
    names = {r["name"] for g in rules["data"]["groups"] for r in g["rules"]}
    assert "AsyncschedDown" in names
