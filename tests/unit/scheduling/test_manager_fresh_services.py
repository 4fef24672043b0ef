"""select_destinations reads the services first (issue 20): what that read finds decides."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable

from asyncsched.objects.models import Flavor, RequestContext, RequestSpec
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host

CTX = RequestContext(request_id="req-fresh", user_id="u", project_id="p")


class DisablingCache(FakeCache):
    """Its services read, begun before Placement's answer, lands later and finds the named
    host disabled (as an API call just did)."""

    def __init__(self, hosts: list[HostState], disable: str) -> None:
        super().__init__(hosts)
        self.disable = disable

    async def begin_fresh_services(self) -> Awaitable[None]:
        self.fresh_reads += 1
        landed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def land() -> None:
            for h in self.hosts.values():
                if h.host == self.disable and h.service is not None:
                    h.service = dataclasses.replace(h.service, disabled=True)
                    h.touch()
            landed.set_result(None)

        asyncio.get_running_loop().call_later(0.01, land)
        return landed


async def test_each_request_reads_services_before_it_filters() -> None:
    hosts = [
        host(f"cmp{i}", free_ram_mb=8192 - i * 512, total_usable_ram_mb=8192) for i in range(3)
    ]
    cache = DisablingCache(hosts, disable="cmp0")  # cmp0 has the most free RAM
    mgr = SchedulerManager(config(), cache, FakePlacement(hosts), clock=lambda: NOW)
    spec = RequestSpec(flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1), num_instances=1)
    [[chosen, *_]] = await mgr.select_destinations(CTX, spec, [str(uuid.uuid4())], True, True)
    assert chosen.service_host == "cmp1"
    assert cache.fresh_reads == 1
    await mgr.select_destinations(CTX, spec, [str(uuid.uuid4())], True, True)
    assert cache.fresh_reads == 2


async def test_the_chance_driver_reads_services_too() -> None:
    hosts = [host(f"cmp{i}") for i in range(2)]
    cache = DisablingCache(hosts, disable="cmp0")
    conf = dataclasses.replace(
        config(), asyncsched=dataclasses.replace(config().asyncsched, driver="chance")
    )
    mgr = ChanceScheduler(conf, cache, FakePlacement(hosts), clock=lambda: NOW)
    spec = RequestSpec(flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1), num_instances=1)
    for _ in range(10):
        [[chosen, *_]] = await mgr.select_destinations(CTX, spec, [str(uuid.uuid4())], True, True)
        assert chosen.service_host == "cmp1"
    assert cache.fresh_reads == 10
