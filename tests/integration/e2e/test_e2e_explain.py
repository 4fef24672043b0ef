"""Explain and capacity against the real ``asyncsched serve``: its admin endpoint, the CLI as
an operator runs it, the real Placement and nova databases, and real multi-creates through the
oslo.messaging client to check that the dry runs told the truth and left nothing behind.

The cloud: four 8 vCPU / 8 GiB / 200 GB hosts, two in cell 1 (AZ east), two in cell 2 (AZ
west), and a large disabled host in AZ east. A 2 vCPU / 2 GiB / 20 GB instance fits four times
per healthy host (RAM: 8704 - 512 reserved), 16 in all.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from tests.support.cloud import (
    AggregatePlan,
    Cloud,
    HostPlan,
    daemon_config,
    decode_reply,
    seeded_cloud,
)
from tests.support.daemon import serving, write_config
from tests.support.nova_db import NovaDB
from tests.support.oslo_caller import (
    OsloSchedulerClient,
    fake_nova_exception,
    request_spec_primitive,
)
from tests.support.placement_server import PlacementServer
from tests.support.serve_process import ServeProcess

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[3]
TOKEN = "explain-" + uuid.uuid4().hex
FLAVOR = {"vcpus": 2, "memory_mb": 2048, "root_gb": 20}
FLAGS = ["--vcpus", "2", "--ram", "2048", "--disk", "20"]


def plan() -> tuple[list[HostPlan], list[AggregatePlan]]:
    hosts = [
        HostPlan(f"{az}-{i}", cell, 8, 8704, 200, aggregates=(az,))
        for cell, az in ((0, "east"), (1, "west"))
        for i in (1, 2)
    ]
    hosts.append(HostPlan("east-3", 0, 64, 262144, 4000, aggregates=("east",), disabled=True))
    return hosts, [AggregatePlan("east", "east"), AggregatePlan("west", "west")]


@dataclass
class Stack:
    db: NovaDB
    placement: PlacementServer
    cloud: Cloud
    daemon: ServeProcess
    url: str
    token_file: Path
    transport_url: str

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        """``python -m asyncsched <args> --url U --token-file F``, as an operator runs it."""
        cmd = [sys.executable, "-m", "asyncsched", *args]
        cmd += ["--url", self.url, "--token-file", str(self.token_file)]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)

    async def usages(self) -> dict[str, dict[str, int]]:
        """Placement's usage of every seeded provider."""
        async with self.placement.seeder() as seeder:
            out = {}
            for name, h in self.cloud.hosts.items():
                out[name] = {k: v for k, v in (await seeder.usages(h.uuid)).items() if v}
            return out


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    placement_server: PlacementServer,
    module_amqp_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Stack]:
    hosts, aggs = plan()
    async with seeded_cloud("asyncsched_explain", placement_server, hosts, aggs, n_cells=2) as (
        db,
        cloud,
    ):
        tmp = tmp_path_factory.mktemp("explain")
        config = daemon_config(
            transport_url=module_amqp_url,
            api_url=db.api_url,
            placement=replace(placement_server.options, timeout=30.0),
            scheduler_host=f"e2e-explain-{uuid.uuid4().hex[:8]}",
            refresh_interval=3600.0,
            full_resync_interval=3600.0,
            admin_listen="127.0.0.1:0",
        )
        async with serving(write_config(tmp, config, admin_token=TOKEN)) as daemon:
            found = re.search(r"admin endpoint on (http://127\.0\.0\.1:\d+)", daemon.stderr())
            assert found, daemon.stderr()
            yield Stack(
                db, placement_server, cloud, daemon, found.group(1), tmp / "token", module_amqp_url
            )


def primitive(n: int) -> dict[str, Any]:
    return request_spec_primitive(None, num_instances=n, group_policy=None, **FLAVOR)


async def test_explain_names_disabled_on_a_disabled_host_and_claims_nothing(stack: Stack) -> None:
    before = await stack.usages()
    done = await asyncio.to_thread(
        stack.cli, "explain", "--vcpus", "2", "--ram", "4096", "--disk", "40", "--host", "east-3"
    )
    assert done.returncode == 0, done.stderr
    assert "host east-3: rejected by ComputeFilter (disabled)" in done.stdout
    assert re.search(r"ComputeFilter\s+5\s+4\s+-1 \(disabled 1\)", done.stdout), done.stdout
    assert await stack.usages() == before == {name: {} for name in stack.cloud.hosts}
    no_token = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "asyncsched", "explain", "--url", stack.url],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert no_token.returncode == 1 and "HTTP 401" in no_token.stderr


async def test_a_host_outside_max_placement_results_is_said_to_be_so(
    stack: Stack, tmp_path: Path
) -> None:
    """A second daemon on the same cloud (nothing booted yet: every host has room) with
    [scheduler] max_placement_results = 2: the real Placement returns 2 of the 5 hosts; every
    other one is said to be beyond the limit (not "no room or traits"), and the disabled host
    is named disabled wherever it is."""
    config = daemon_config(
        transport_url=stack.transport_url,
        api_url=stack.db.api_url,
        placement=replace(stack.placement.options, timeout=30.0),
        scheduler_host=f"e2e-explain-limit-{uuid.uuid4().hex[:8]}",
        refresh_interval=3600.0,
        full_resync_interval=3600.0,
        admin_listen="127.0.0.1:0",
    )
    conf = write_config(tmp_path, config, admin_token=TOKEN)
    conf.write_text(conf.read_text() + "[scheduler]\nmax_placement_results = 2\n")
    async with serving(conf) as daemon:
        found = re.search(r"admin endpoint on (http://127\.0\.0\.1:\d+)", daemon.stderr())
        assert found, daemon.stderr()
        limited = replace(stack, url=found.group(1))
        verdicts = {}
        for name in stack.cloud.hosts:
            answer = await admin(
                limited, "POST", "/v1/explain", {"request_spec": primitive(1), "host": name}
            )
            assert answer["steps"][0]["out"] == 2, answer["steps"][0]
            verdicts[name] = answer["host"]
        east3 = await asyncio.to_thread(limited.cli, "explain", *FLAGS, "--host", "east-3")
    kinds = [v["verdict"] for v in verdicts.values()]
    assert kinds.count("beyond-limit") == 3, verdicts
    assert all(v["limit"] == 2 for v in verdicts.values() if v["verdict"] == "beyond-limit")
    assert {"step": "ComputeFilter", "reason": "disabled"} in verdicts["east-3"]["failed"]
    assert east3.returncode == 0, east3.stderr
    if verdicts["east-3"]["verdict"] == "beyond-limit":
        assert "not among the first 2 allocation candidates" in east3.stdout, east3.stdout
        assert "it also fails ComputeFilter (disabled)" in east3.stdout, east3.stdout
    else:
        assert "host east-3: rejected by ComputeFilter (disabled)" in east3.stdout, east3.stdout


async def admin(stack: Stack, method: str, path: str, body: Any = None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        aiohttp.ClientSession(headers=headers) as s,
        s.request(method, f"{stack.url}{path}", json=body) as r,
    ):
        assert r.status == 200, await r.text()
        answer: dict[str, Any] = await r.json()
        return answer


async def test_explain_foretells_the_real_decision_and_leaves_no_trace(
    stack: Stack, client: OsloSchedulerClient
) -> None:
    async def explained(n: int) -> dict[str, Any]:
        return await admin(
            stack, "POST", "/v1/explain", {"request_spec": primitive(n), "host": "west-1"}
        )

    status = await admin(stack, "GET", "/v1/status")
    decided = status["components"]["scheduler"]["recent_outcomes"]
    first = await explained(3)
    again = await explained(3)  # an explain changes nothing an explain can see
    assert first["selections"] == again["selections"] and first["top"] == again["top"]
    assert first["outcome"] == "ok" and first["claimed"] is False
    assert await stack.usages() == {name: {} for name in stack.cloud.hosts}
    status = await admin(stack, "GET", "/v1/status")
    assert status["components"]["hoststate"]["assumed"] == 0  # no assumption in the cache
    assert status["components"]["scheduler"]["recent_outcomes"] == decided  # no decision
    uuids = [str(uuid.uuid4()) for _ in range(3)]
    reply = await asyncio.to_thread(client.select_destinations, primitive(3), uuids)
    real = decode_reply(reply)
    assert [s[0].service_host for s in real] == [s["host"] for s in first["selections"]]
    assert [[a.service_host for a in s[1:]] for s in real] == [
        s["alternates"] for s in first["selections"]
    ]
    used = await stack.usages()
    assert sum(u.get("MEMORY_MB", 0) for u in used.values()) == 3 * 2048  # only the real ones
    status = await admin(stack, "GET", "/v1/status")
    assert status["components"]["hoststate"]["assumed"] == 3
    async with stack.placement.seeder() as seeder:
        for u in uuids:
            code, _ = await seeder.call("DELETE", f"/allocations/{u}")
            assert code == 204


async def test_capacity_agrees_with_a_real_multi_create(
    stack: Stack, client: OsloSchedulerClient
) -> None:
    done = await asyncio.to_thread(stack.cli, "capacity", *FLAGS, "--json")
    assert done.returncode == 0, done.stderr
    cap = json.loads(done.stdout)
    assert cap["total"] == 16 and cap["hosts_used"] == 4
    assert cap["per_az"] == {"east": 8, "west": 8}
    assert cap["limited_by"] == {"Placement: MEMORY_MB": 4}
    assert cap["excluded"] == {"ComputeFilter: disabled": 1}
    text = await asyncio.to_thread(stack.cli, "capacity", *FLAGS)
    assert "16 more instances fit, on 4 of 5 hosts" in text.stdout
    assert await stack.usages() == {name: {} for name in stack.cloud.hosts}

    one_more = [str(uuid.uuid4()) for _ in range(cap["total"] + 1)]
    with fake_nova_exception() as nova_exc:
        with pytest.raises(nova_exc.NoValidHost):
            await asyncio.to_thread(client.select_destinations, primitive(len(one_more)), one_more)
    assert await stack.usages() == {name: {} for name in stack.cloud.hosts}  # rolled back
    exactly = [str(uuid.uuid4()) for _ in range(cap["total"])]
    reply = await asyncio.to_thread(client.select_destinations, primitive(len(exactly)), exactly)
    assert len(decode_reply(reply)) == cap["total"]
    after = json.loads((await asyncio.to_thread(stack.cli, "capacity", *FLAGS, "--json")).stdout)
    assert after["total"] == 0
