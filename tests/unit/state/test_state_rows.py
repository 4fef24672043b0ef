"""Row -> HostState value rules (nova's HostState.update), without a database."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from asyncsched.conf.options import Config, DefaultOptions
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState
from asyncsched.state.rows import (
    effective_ratio,
    node_snapshot,
    parse_metrics,
    parse_stats,
    parse_supported_instances,
    resolve_ratios,
    service_info,
)
from tests.support.nova_db import NODE_COLUMNS, NodeSpec, node_values

_COLS = [c.strip() for c in NODE_COLUMNS.split(",")]


def row(**over: Any) -> dict[str, Any]:
    """A compute_nodes row as the fixture would insert it, as a mapping."""
    spec = NodeSpec(host="h1", uuid="u-1")
    values = node_values(spec, 1, datetime(2026, 1, 1, 12, 0, 0))
    r = dict(zip(_COLS, values, strict=True))
    r["id"] = 7
    r.update(over)
    return r


def test_snapshot_basic_fields() -> None:
    s = node_snapshot(row(), "cell-1")
    assert s is not None
    assert (s.uuid, s.host, s.nodename, s.cell_uuid, s.compute_node_id) == (
        "u-1",
        "h1",
        "h1",
        "cell-1",
        7,
    )
    assert s.free_ram_mb == 131072 - 512
    assert s.free_disk_mb == 1000 * 1024
    assert s.updated == datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert s.numa_topology is not None and len(s.numa_topology.cells) == 2
    assert s.pci_pools[0].count == 8


@pytest.mark.parametrize(
    ("free", "least", "expected_gb"),
    [(100, None, 100), (100, 40, 40), (100, 150, 100), (100, -5, -5)],
)
def test_disk_available_least_rule(free: int, least: int | None, expected_gb: int) -> None:
    s = node_snapshot(row(free_disk_gb=free, disk_available_least=least), "c")
    assert s is not None and s.free_disk_mb == expected_gb * 1024


def test_usage_not_reported_or_identity_missing_is_skipped() -> None:
    assert node_snapshot(row(free_disk_gb=None), "c") is None
    assert node_snapshot(row(uuid=None), "c") is None
    assert node_snapshot(row(hypervisor_hostname=None), "c") is None


def test_allocation_ratio_rules() -> None:
    assert effective_ratio(None, None, 4.0) == 4.0
    assert effective_ratio(0.0, None, 4.0) == 4.0
    assert effective_ratio(0.0, 8.0, 4.0) == 8.0
    assert effective_ratio(2.5, 8.0, 4.0) == 2.5
    s = node_snapshot(row(cpu_allocation_ratio=0.0, ram_allocation_ratio=None), "c")
    assert s is not None
    d = DefaultOptions(ram_allocation_ratio=1.5, initial_disk_allocation_ratio=2.0)
    assert resolve_ratios(s, d) == (4.0, 1.5, 2.0)


def test_json_columns() -> None:
    assert parse_stats('{"num_instances": 3, "x": "y"}') == {"num_instances": "3", "x": "y"}
    assert parse_stats(None) == {}
    assert parse_metrics(json.dumps([{"name": "a", "value": 1}, {"bogus": 1}])) == {"a": 1.0}
    assert parse_supported_instances('[["x86_64","kvm","hvm"],["bad"]]') == (
        ("x86_64", "kvm", "hvm"),
    )
    s = node_snapshot(row(stats='{"num_instances": "nope", "io_workload": "4"}'), "c")
    assert s is not None and (s.num_instances, s.num_io_ops) == (0, 4)


def test_malformed_json_falls_back_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        s = node_snapshot(
            row(numa_topology="{", pci_stats="[", metrics="{}", stats="[]"),
            "c",
        )
    assert s is not None
    assert s.numa_topology is None and s.pci_pools == () and s.metrics == {}
    assert s.stats == {} and s.num_instances == 0
    assert s.free_ram_mb == 131072 - 512
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "numa_topology" in warnings[0].getMessage()


def test_service_info_is_exact_and_aware() -> None:
    ts = datetime(2026, 1, 1, 0, 0, 0)
    svc = service_info(
        {
            "id": 3,
            "uuid": "s-1",
            "host": "h1",
            "binary": "nova-compute",
            "disabled": None,
            "disabled_reason": None,
            "forced_down": True,
            "last_seen_up": None,
            "created_at": ts,
            "updated_at": None,
            "version": None,
        }
    )
    assert svc.forced_down and not svc.disabled and svc.version == 0
    assert svc.last_seen_up is None and svc.created_at == ts.replace(tzinfo=UTC)


async def test_consume_and_release_arithmetic_without_db() -> None:
    cache = HostStateCache(Config())
    hs = HostState(uuid="u", host="h", nodename="n", cell_uuid="c")
    hs.free_ram_mb, hs.free_disk_mb, hs.vcpus_used = 8192, 100 * 1024, 2
    spec = RequestSpec(flavor=Flavor(memory_mb=2048, vcpus=3, root_gb=10, ephemeral_gb=5, swap=512))
    gen = hs.generation
    await cache.consume(hs, spec, "i-1")
    assert (hs.free_ram_mb, hs.free_disk_mb, hs.vcpus_used) == (6144, 85 * 1024, 5)
    assert (hs.num_instances, hs.num_io_ops) == (1, 1)
    assert hs.instances == {"i-1"} and set(hs.assumed) == {"i-1"}
    assert hs.generation > gen and hs.updated is not None
    await cache.consume(hs, spec, "i-1")  # the same instance twice counts once
    assert (hs.free_ram_mb, hs.vcpus_used, hs.num_instances) == (6144, 5, 1)
    await cache.release(hs, "unknown")  # nothing assumed under that uuid: no change
    assert hs.free_ram_mb == 6144
    await cache.consume(hs, spec, "i-2")
    await cache.release(hs, "i-2")  # a host outside any cell: the arithmetic is undone
    assert (hs.free_ram_mb, hs.free_disk_mb, hs.vcpus_used) == (6144, 85 * 1024, 5)
    assert (hs.num_instances, hs.num_io_ops) == (1, 1)
    assert hs.instances == {"i-1"}
