"""The explain tests' stack: three hosts (cmp1 disabled) behind a SchedulerManager over fakes,
its explain routes served by aiohttp on a free local port."""

from __future__ import annotations

from aiohttp import web

from asyncsched.admin.explain_api import ExplainAPI
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import ServiceInfo
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host


def explain_manager(ram_step_mb: int | None = None) -> tuple[SchedulerManager, FakePlacement]:
    """cmp0..cmp2, cmp1 disabled; with ``ram_step_mb`` each next host has that less free RAM."""
    hosts = [
        host(f"cmp{i}")
        if ram_step_mb is None
        else host(f"cmp{i}", free_ram_mb=8192 - ram_step_mb * i)
        for i in range(3)
    ]
    hosts[1].service = ServiceInfo(id=2, host="cmp1", disabled=True, last_seen_up=NOW)
    placement = FakePlacement(hosts)
    return SchedulerManager(config(), FakeCache(hosts), placement, clock=lambda: NOW), placement


async def serve_explain(mgr: SchedulerManager) -> tuple[web.AppRunner, str]:
    """The manager's explain routes on 127.0.0.1 (a free port); cleanup() the runner after."""
    app = web.Application()
    app.add_routes(ExplainAPI(mgr).routes())
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}"
