"""A seeded cloud for end-to-end runs: nova databases and Placement describing the same hosts.

What nova keeps consistent in a real cloud, the seeding here keeps consistent by construction:
each compute host is a services row + compute_nodes row (uuid U) in its cell database and a
host mapping in the API database, AND a Placement root provider with uuid U, the OWNER_NOVA
trait and inventories matching the node; a nova host aggregate (uuid A, with its AZ metadata)
is mirrored as Placement aggregate A on its hosts' providers, as nova-api keeps them in sync.

Used by the e2e tests and by ``tools/demo.py`` (importable without pytest).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import uuid as uuidlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncsched.conf.options import (
    ApiDatabaseOptions,
    AsyncschedOptions,
    Config,
    DefaultOptions,
    FilterSchedulerOptions,
    OsloMessagingRabbitOptions,
    PlacementOptions,
)
from asyncsched.objects.models import Selection
from tests.support.nova_db import NodeSpec, NovaDB
from tests.support.placement_server import PlacementServer, Seeder

# The request_spec() helper of tests.support.oslo_caller asks for this trait (flavor extra
# spec trait:HW_CPU_X86_AVX2=required); every seeded provider has it.
HOST_TRAITS = ("HW_CPU_X86_AVX2",)
# The e2e cloud: one small flavor's resources, and the hosts of az1 (cells 1 and 2).
SMALL = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
AZ1 = [f"c{c}-{i:02d}" for c in (1, 2) for i in range(14)]


@dataclass(frozen=True, slots=True)
class HostPlan:
    """One compute host to seed (its node is named like the host)."""

    host: str
    cell: int  # index into NovaDB.cells
    vcpus: int = 32
    memory_mb: int = 131072
    disk_gb: int = 2000
    aggregates: tuple[str, ...] = ()  # names of AggregatePlan it belongs to
    disabled: bool = False
    forced_down: bool = False


@dataclass(frozen=True, slots=True)
class AggregatePlan:
    name: str
    availability_zone: str | None = None
    metadata: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SeededHost:
    plan: HostPlan
    uuid: str
    cell_uuid: str

    @property
    def host(self) -> str:
        return self.plan.host


@dataclass(frozen=True, slots=True)
class SeededAggregate:
    plan: AggregatePlan
    id: int
    uuid: str
    hosts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Cloud:
    """What was seeded, to check Selections and allocations against."""

    hosts: Mapping[str, SeededHost]
    aggregates: Mapping[str, SeededAggregate]

    @property
    def by_uuid(self) -> dict[str, SeededHost]:
        return {h.uuid: h for h in self.hosts.values()}

    def az_of(self, host: str, default: str = "nova") -> str:
        for agg in self.aggregates.values():
            if host in agg.hosts and agg.plan.availability_zone:
                return agg.plan.availability_zone
        return default


@contextlib.asynccontextmanager
async def seeded_cloud(
    prefix: str,
    placement: PlacementServer,
    hosts: Sequence[HostPlan],
    aggregates: Sequence[AggregatePlan] = (),
    *,
    n_cells: int,
    db: NovaDB | None = None,
) -> AsyncIterator[tuple[NovaDB, Cloud]]:
    """Fresh nova API and cell databases (named after ``prefix``; ``db`` for another kind, such
    as ``MysqlNovaDB``) and ``placement`` seeded with the same hosts (``seed_cloud``); the
    databases are dropped at the end."""
    db = NovaDB(prefix=prefix) if db is None else db
    try:
        await db.create(n_cells=n_cells)
        async with placement.seeder() as seeder:
            cloud = await seed_cloud(db, seeder, hosts, aggregates)
        yield db, cloud
    finally:
        await db.drop()


async def seed_cloud(
    db: NovaDB,
    seeder: Seeder,
    hosts: Sequence[HostPlan],
    aggregates: Sequence[AggregatePlan] = (),
) -> Cloud:
    """Seed the nova databases and Placement with the same hosts, concurrently."""
    members: dict[str, list[str]] = {a.name: [] for a in aggregates}
    for h in hosts:
        for name in h.aggregates:
            members[name].append(h.host)
    seeded_aggs: dict[str, SeededAggregate] = {}
    for a in aggregates:
        metadata = dict(a.metadata)
        if a.availability_zone:
            metadata["availability_zone"] = a.availability_zone
        agg_id, agg_uuid = await db.add_aggregate(a.name, members[a.name], metadata)
        seeded_aggs[a.name] = SeededAggregate(a, agg_id, agg_uuid, tuple(members[a.name]))

    async def one(plan: HostPlan) -> SeededHost:
        cell = db.cells[plan.cell]
        node_uuid = str(uuidlib.uuid4())
        await seeder.compute_node(
            plan.host,
            uuid=node_uuid,
            vcpus=plan.vcpus,
            memory_mb=plan.memory_mb,
            disk_gb=plan.disk_gb,
            traits=HOST_TRAITS,
            aggregates=[seeded_aggs[name].uuid for name in plan.aggregates],
        )
        await db.add_host(
            cell,
            NodeSpec(
                host=plan.host,
                uuid=node_uuid,
                vcpus=plan.vcpus,
                memory_mb=plan.memory_mb,
                memory_mb_used=512,
                local_gb=plan.disk_gb,
            ),
            disabled=plan.disabled,
            disabled_reason="maintenance" if plan.disabled else None,
            forced_down=plan.forced_down,
        )
        return SeededHost(plan, node_uuid, cell.uuid)

    done = await asyncio.gather(*(one(h) for h in hosts))
    return Cloud({h.host: h for h in done}, seeded_aggs)


def daemon_config(
    *,
    transport_url: str,
    api_url: str,
    placement: PlacementOptions,
    scheduler_host: str,
    enabled_filters: Sequence[str] | None = None,
    service_down_time: int = 86400,
    **asyncsched: Any,
) -> Config:
    """An asyncsched Config for a seeded cloud (fast reconnects, quiet background refresh).

    The seeded services never heartbeat, so ``service_down_time`` is a day by default: a module
    that runs longer than nova's 60 s on a loaded machine must not find every host down."""
    fs = FilterSchedulerOptions()
    if enabled_filters is not None:
        fs = dataclasses.replace(fs, enabled_filters=tuple(enabled_filters))
    return Config(
        default=dataclasses.replace(
            DefaultOptions(),
            transport_url=transport_url,
            host=scheduler_host,
            service_down_time=service_down_time,
        ),
        api_database=ApiDatabaseOptions(connection=api_url),
        placement=placement,
        filter_scheduler=fs,
        oslo_messaging_rabbit=dataclasses.replace(
            OsloMessagingRabbitOptions(),
            rabbit_retry_interval=0.2,
            rabbit_retry_backoff=0.2,
            kombu_reconnect_delay=0.2,
        ),
        asyncsched=dataclasses.replace(AsyncschedOptions(), **asyncsched),
    )


def config_file_text(config: Config) -> str:
    """The nova.conf-style file ``asyncsched serve --config-file`` reads for ``config``.

    Only the options the e2e runs set (and any ``[asyncsched]`` option off its default);
    everything else keeps nova's defaults.
    """
    d, p, a = config.default, config.placement, config.asyncsched
    lines = [
        "[DEFAULT]",
        f"transport_url = {d.transport_url}",
        f"host = {d.host}",
        f"debug = {d.debug}",
        f"service_down_time = {d.service_down_time}",
        "[api_database]",
        f"connection = {config.api_database.connection}",
        "[placement]",
        f"auth_type = {p.auth_type}",
        f"endpoint_override = {p.endpoint_override}",
    ]
    if p.timeout is not None:
        lines.append(f"timeout = {p.timeout}")
    lines += [
        "[filter_scheduler]",
        f"enabled_filters = {','.join(config.filter_scheduler.enabled_filters)}",
        f"host_subset_size = {config.filter_scheduler.host_subset_size}",
        "[oslo_messaging_rabbit]",
        f"rabbit_retry_interval = {config.oslo_messaging_rabbit.rabbit_retry_interval}",
        f"rabbit_retry_backoff = {config.oslo_messaging_rabbit.rabbit_retry_backoff}",
        f"kombu_reconnect_delay = {config.oslo_messaging_rabbit.kombu_reconnect_delay}",
        "[asyncsched]",
        f"refresh_interval = {a.refresh_interval}",
        f"full_resync_interval = {a.full_resync_interval}",
        f"drain_timeout = {a.drain_timeout}",
        f"claim_concurrency = {a.claim_concurrency}",
    ]
    always = {"refresh_interval", "full_resync_interval", "drain_timeout", "claim_concurrency"}
    defaults = AsyncschedOptions()
    for f in dataclasses.fields(a):  # every other [asyncsched] option the config sets
        value = getattr(a, f.name)
        if f.name not in always and value is not None and value != getattr(defaults, f.name):
            lines.append(f"{f.name} = {value}")
    return "\n".join(lines) + "\n"


def decode_reply(reply: Any) -> list[list[Selection]]:
    """select_destinations' return value (Selection primitives) as model values."""
    from asyncsched.objects.codec import decode_selection

    assert isinstance(reply, list), reply
    return [[decode_selection(s) for s in per_instance] for per_instance in reply]


def allocation_of(selection: Selection) -> dict[str, Any]:
    """The allocation request a Selection carries (nova sends it as a JSON string)."""
    assert isinstance(selection.allocation_request, str), selection
    data: dict[str, Any] = json.loads(selection.allocation_request)
    return data


# The e2e cloud: 28 general hosts of varied sizes in AZ az1 (14 per cell); 4 small hosts in
# az-cap that take exactly two 4 GiB instances each (8704 MB - 512 reserved); az-maint with a
# disabled and a forced-down giant next to one small healthy host; one spare host in no
# aggregate (default AZ) for the aggregate-cast test.
GENERAL_SIZES = [(16, 65536), (32, 131072), (48, 196608), (64, 262144)]


def cloud_plan() -> tuple[list[HostPlan], list[AggregatePlan]]:
    """The e2e tests' cloud (tests/integration/e2e)."""
    hosts: list[HostPlan] = []
    for cell in (0, 1):
        for i in range(14):
            vcpus, mem = GENERAL_SIZES[i % len(GENERAL_SIZES)]
            hosts.append(
                HostPlan(f"c{cell + 1}-{i:02d}", cell, vcpus, mem, 4000, aggregates=("az1",))
            )
    hosts += [HostPlan(f"cap-{i}", 1, 8, 8704, 1000, aggregates=("cap",)) for i in range(4)]
    hosts += [
        HostPlan("maint-ok", 0, 8, 16384, 500, aggregates=("maint",)),
        HostPlan("maint-disabled", 0, 128, 1048576, 8000, aggregates=("maint",), disabled=True),
        HostPlan("maint-down", 0, 128, 1048576, 8000, aggregates=("maint",), forced_down=True),
        HostPlan("spare", 1, 16, 65536, 1000),
    ]
    aggs = [
        AggregatePlan("az1", availability_zone="az1"),
        AggregatePlan("cap", availability_zone="az-cap"),
        AggregatePlan("maint", availability_zone="az-maint"),
    ]
    return hosts, aggs


@dataclass(frozen=True, slots=True)
class SeededStack:
    """The e2e tests' databases and Placement, seeded with ``cloud_plan``."""

    db: NovaDB
    placement: PlacementServer
    cloud: Cloud
