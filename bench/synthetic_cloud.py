"""Synthetic clouds of HostStates for the benchmark and the parity tests (no I/O)."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

from asyncsched.conf.options import Config
from asyncsched.objects.host_resources import PciDevicePool
from asyncsched.objects.models import Aggregate, RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.scheduling.filters.compute_filter import ComputeFilter
from asyncsched.scheduling.loader import load_filters, load_weighers
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState, ServiceInfo

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def pipeline(config: Config) -> tuple[list[BaseHostFilter], list[BaseHostWeigher]]:
    """The filters and weighers ``config`` enables, ComputeFilter's clock stopped at NOW (the
    synthetic services' heartbeats are relative to it)."""
    filters = load_filters(config)
    for f in filters:
        if isinstance(f, ComputeFilter):
            f.clock = lambda: NOW
    return filters, load_weighers(config)


def make_cloud(
    n: int,
    rng: random.Random,
    *,
    cells: int = 2,
    now: datetime = NOW,
    aggregates: bool = True,
    ties: bool = False,
    overrides: bool = False,
) -> tuple[list[HostState], list[Aggregate]]:
    """``n`` hosts with varied resources, some disabled/down, a few aggregates with metadata.

    With ``ties`` many hosts share identical numbers (exercises stable tie-breaking).
    """
    cell_ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(cells)]
    hosts: list[HostState] = []
    for i in range(n):
        name = f"cmp{i:05d}"
        q = 4 if ties else 1000
        ram = 65536 * (1 + rng.randrange(4))
        free_ram = rng.randrange(q) * ram // q - (512 if rng.random() < 0.02 else 0)
        beat = now - timedelta(
            seconds=rng.choice([5, 20, 30, 59] if rng.random() > 0.03 else [61, 600])
        )
        svc = ServiceInfo(
            id=i + 1,
            host=name,
            disabled=rng.random() < 0.03,
            forced_down=rng.random() < 0.01,
            last_seen_up=beat if rng.random() > 0.1 else None,
            created_at=beat,
        )
        pools: tuple[PciDevicePool, ...] = ()
        if rng.random() < 0.1:
            pools = (
                PciDevicePool(
                    vendor_id="8086", product_id="1520", numa_node=0, count=rng.randrange(1, 8)
                ),
            )
        hosts.append(
            HostState(
                uuid=str(uuid.UUID(int=rng.getrandbits(128))),
                host=name,
                nodename=f"{name}.example",
                cell_uuid=cell_ids[i % cells],
                compute_node_id=i + 1,
                total_usable_ram_mb=ram,
                free_ram_mb=free_ram,
                total_usable_disk_gb=2000,
                free_disk_mb=rng.randrange(q) * 2000 * 1024 // q,
                vcpus_total=64,
                vcpus_used=rng.randrange(0, 256, 1 if not ties else 64),
                cpu_allocation_ratio=4.0,
                num_instances=rng.randrange(0, 60, 1 if not ties else 20),
                num_io_ops=rng.randrange(0, 10, 1 if not ties else 5),
                failed_builds=1 if rng.random() < 0.02 else 0,
                hypervisor_version=rng.choice([8000000, 9000000, 9001000]),
                hypervisor_type="QEMU",
                supported_instances=(("x86_64", "qemu", "hvm"),)
                if rng.random() > 0.05
                else (("aarch64", "qemu", "hvm"),),
                host_ip=f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}",
                stats={"num_instances": "0"},
                pci_pools=pools,
                service=svc,
            )
        )
    aggs: list[Aggregate] = []
    if aggregates:
        for a in range(4):
            members = tuple(h.host for h in hosts if rng.random() < 0.25)
            meta = {"availability_zone": f"az{a % 2}"}
            if a == 3 and overrides:
                meta["ram_weight_multiplier"] = "2.0"
            aggs.append(
                Aggregate(
                    id=a + 1,
                    uuid=str(uuid.UUID(int=rng.getrandbits(128))),
                    name=f"agg{a}",
                    hosts=members,
                    metadata=meta,
                )
            )
        by_host: dict[str, list[Aggregate]] = {}
        for agg in aggs:
            for h in agg.hosts:
                by_host.setdefault(h, []).append(agg)
        for hs in hosts:
            hs.aggregates = tuple(by_host.get(hs.host, ()))
    return hosts, aggs


def consume(h: HostState, s: RequestSpec, uuid: str) -> None:
    """nova's consume_from_request arithmetic (what the cache does under the lock)."""
    h.free_ram_mb -= s.flavor.memory_mb
    h.free_disk_mb -= (s.flavor.root_gb + s.flavor.ephemeral_gb) * 1024
    h.vcpus_used += s.flavor.vcpus
    h.num_instances += 1
    h.num_io_ops += 1
    h.instances.add(uuid)
    h.touch()
