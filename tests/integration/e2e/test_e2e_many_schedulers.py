"""Three asyncsched schedulers on one cloud, booting concurrently through oslo.messaging.

Issue #13: several scheduler processes share nova's ``scheduler`` queue; each only knows its
own consumption, so they pick the same free host at the same moment, and the real Placement
(16.0.0 on PostgreSQL) lets concurrent claims on one provider overcommit it. Here three
daemons (build_daemon + Service, as ``asyncsched serve`` wires them) consume one vhost, and
real oslo.messaging clients send single-instance boots from many threads at once into a tight
AZ. With the guard no provider ends over capacity, every Selection's allocation is in
Placement and every NoValidHost holds none.

That the race itself shows without the guard is asserted where it shows reliably, with three
clients racing for one slot (tests/integration/placement/test_overcommit_real.py): through
whole daemons it is rarer (the issue measured 603 instances on 600 slots after 400 boots),
and a test waiting for it here would be slow and flaky.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import pytest
import pytest_asyncio

from asyncsched.app import Daemon, build_daemon
from asyncsched.service import Service
from tests.support import broker
from tests.support.cloud import AggregatePlan, Cloud, HostPlan, daemon_config, seed_cloud
from tests.support.e2e_checks import allocations
from tests.support.nova_db import NovaDB
from tests.support.oslo_caller import (
    OsloSchedulerClient,
    fake_nova_exception,
    request_spec_primitive,
)
from tests.support.pinger import Pinger
from tests.support.placement_server import PlacementServer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

SCHEDULERS = 3
CALLERS = 12
HOSTS = 6  # per AZ, each fits two instances: 12 slots
BOOTS = 24  # twice what fits
MEMORY_MB = 4096  # 8704 MB hosts minus 512 reserved: exactly two
BIG = 5000


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tight_cloud(placement_server: PlacementServer) -> AsyncIterator[tuple[NovaDB, Cloud]]:
    db = NovaDB(prefix="asyncsched_race")
    try:
        await db.create(n_cells=1)
        hosts = [
            HostPlan(f"{az}-{i}", 0, 8, 8704, 1000, aggregates=(az,))
            for az in ("guarded",)
            for i in range(HOSTS)
        ]
        # room for the 5,000-instance call, away from the tight AZ
        hosts += [
            HostPlan(f"roomy-{i}", 0, 64, 1048576, 100000, aggregates=("roomy",)) for i in range(2)
        ]
        aggs = [
            AggregatePlan("guarded", availability_zone="guarded"),
            AggregatePlan("roomy", availability_zone="roomy"),
        ]
        async with placement_server.seeder() as seeder:
            cloud = await seed_cloud(db, seeder, hosts, aggs)
        yield db, cloud
    finally:
        await db.drop()


@pytest.fixture
def vhost_url() -> Iterator[str]:
    with broker.throwaway_vhost("asyncsched-race") as name:
        yield broker.amqp_url(name)


@asynccontextmanager
async def schedulers(
    db: NovaDB,
    placement: PlacementServer,
    amqp_url: str,
    *,
    guard: bool,
    count: int = SCHEDULERS,
) -> AsyncIterator[list[Daemon]]:
    services: list[Service] = []
    daemons: list[Daemon] = []
    try:
        for i in range(count):
            config = daemon_config(
                transport_url=amqp_url,
                api_url=db.api_url,
                placement=placement.options,
                scheduler_host=f"race-{i}-{uuid.uuid4().hex[:6]}",
                refresh_interval=3600.0,
                full_resync_interval=3600.0,
                drain_timeout=10.0,
                overcommit_guard=guard,
            )
            daemon = build_daemon(config)
            service = Service(config, daemon.components, None, [])
            await service.start()
            services.append(service)
            daemons.append(daemon)
        yield daemons
    finally:
        for s in services:
            await s.stop()


async def boot_all(amqp_url: str, az: str) -> tuple[list[str], list[str]]:
    """BOOTS single-instance boots from CALLERS threads at once: (placed, NoValidHost)."""
    uuids = [str(uuid.uuid4()) for _ in range(BOOTS)]
    clients = [
        OsloSchedulerClient(amqp_url, timeout=120.0, call_monitor_timeout=60.0)
        for _ in range(CALLERS)
    ]
    placed: list[str] = []
    refused: list[str] = []
    loop = asyncio.get_running_loop()
    with fake_nova_exception() as nova_exc, ThreadPoolExecutor(CALLERS) as pool:

        def one(i: int, u: str) -> None:
            spec = request_spec_primitive(
                num_instances=1,
                memory_mb=MEMORY_MB,
                vcpus=1,
                root_gb=20,
                group_policy=None,
                availability_zone=az,
            )
            try:
                clients[i % CALLERS].select_destinations(spec, [u])
                placed.append(u)
            except nova_exc.NoValidHost:
                refused.append(u)

        try:
            await asyncio.gather(
                *(loop.run_in_executor(pool, one, i, u) for i, u in enumerate(uuids))
            )
        finally:
            for c in clients:
                c.close()
    return placed, refused


async def usage_over(placement: PlacementServer, cloud: Cloud, az: str) -> dict[str, int]:
    """Per host of ``az``: MEMORY_MB used beyond the 8192 MB capacity (only those over)."""
    over: dict[str, int] = {}
    async with placement.seeder() as s:
        for name, h in cloud.hosts.items():
            if name.startswith(az):
                used = (await s.usages(h.uuid)).get("MEMORY_MB", 0)
                if used > 8192:
                    over[name] = used - 8192
    return over


async def test_guard_on_no_provider_ends_over_capacity(
    tight_cloud: tuple[NovaDB, Cloud], placement_server: PlacementServer, vhost_url: str
) -> None:
    db, cloud = tight_cloud
    async with schedulers(db, placement_server, vhost_url, guard=True) as daemons:
        placed, refused = await boot_all(vhost_url, "guarded")
        guards = [d.placement.health()["overcommit_guard"] for d in daemons]
    # every claim Placement accepted went through a guard (wired by build_daemon)
    assert sum(g["confirmed"] for g in guards) >= len(placed), guards
    assert await usage_over(placement_server, cloud, "guarded") == {}
    assert len(placed) + len(refused) == BOOTS and len(placed) <= 2 * HOSTS
    held = await allocations(placement_server, placed + refused)
    assert all(held[u]["allocations"] for u in placed), "a Selection without its allocation"
    assert all(not held[u]["allocations"] for u in refused), "a NoValidHost left an allocation"
    # most of the capacity is used: a race loses a slot only when both racers back out
    assert len(placed) >= HOSTS, placed


async def test_pings_are_answered_while_a_5000_instance_call_is_decided(
    tight_cloud: tuple[NovaDB, Cloud], placement_server: PlacementServer, vhost_url: str
) -> None:
    """nova's BaseAPI ping, every 20 ms from another oslo client, while one daemon decides a
    5,000-instance call without instance uuids (no claims, as nova): no ping waits long.

    The call asks for the legacy reply (``return_objects=False``, one small dict per
    instance), so what is measured is the decision. The Selection-object reply of such a
    call (17 MB with alternates) is encoded with loop turns too (``rpc.paced``); its loop gap
    is checked in tests/unit/rpc/test_rpc_paced.py.
    """
    db, _ = tight_cloud
    spec = request_spec_primitive(
        num_instances=BIG,
        memory_mb=64,
        vcpus=1,
        root_gb=1,
        group_policy=None,
        availability_zone="roomy",
    )
    caller = OsloSchedulerClient(vhost_url, timeout=300.0, call_monitor_timeout=120.0)
    async with schedulers(db, placement_server, vhost_url, guard=True, count=1):
        # The pinger is a process of its own (a thread here would share the GIL with the
        # in-process daemon and time GIL hand-offs); it has its first answer before timing.
        try:
            async with Pinger(vhost_url) as pinger:
                t0 = time.perf_counter()
                reply = await asyncio.to_thread(
                    caller.call,
                    "select_destinations",
                    spec_obj=spec,
                    instance_uuids=None,
                    return_objects=False,
                    return_alternates=False,
                )
                took = time.perf_counter() - t0
        finally:
            caller.close()
    rtts = pinger.rtts
    print(
        f"FIGURE pings: {len(rtts)} during a {took:.2f} s call, worst {max(rtts, default=0):.3f} s"
    )
    assert len(reply) == BIG
    assert took > 0.1, f"{took:.2f} s: too quick to say anything about stalls"
    assert len(rtts) >= took / 0.5, (len(rtts), took)
    # A decision that kept the loop would make the ping sent as it starts wait about the whole
    # call. The bound is the larger of 0.5 s (this test's original bar; the is 1 s) and
    # half the call.
    limit = max(0.5 * took, 0.5)
    assert max(rtts) < limit, f"a ping waited {max(rtts):.2f} s during a {took:.2f} s call"
