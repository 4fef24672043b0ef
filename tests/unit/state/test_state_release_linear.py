"""Releasing many assumptions is linear in the instances: each host is rebuilt once.

Counted, not timed: the arithmetic and NUMA/PCI re-apply calls a release makes. Before,
releasing one instance rebuilt its host with every other pending one (n releases of n
pending instances on one host: n*(n-1)/2 re-applies; 30,000 took 20 s).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, InstancePCIRequest, RequestSpec
from asyncsched.resources.numa.consume import Reapplied
from asyncsched.state import assumptions
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState, PlacedNumaPci
from tests.support.node_snapshots import snap

SPEC = RequestSpec(flavor=Flavor(memory_mb=1, vcpus=1))
GPU = PlacedNumaPci(pci_requests=(InstancePCIRequest(count=1, spec=({"vendor_id": "x"},)),))


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of the per-instance steps of a rebuild."""
    seen: Counter[str] = Counter()

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    for name in ("apply_scalars", "unapply_scalars", "rebase", "rebuild_numa_pci"):
        monkeypatch.setattr(assumptions, name, counted(name, getattr(assumptions, name)))

    def reapply(placed: PlacedNumaPci, topo: Any, pools: Any) -> Reapplied:
        seen["reapply_placed"] += 1
        return Reapplied(topo, pools, placed.fitted)

    monkeypatch.setattr(assumptions, "reapply_placed", reapply)
    return seen


def host(name: str) -> HostState:
    hs = HostState(uuid=name, host=name, nodename=name, cell_uuid="c")
    hs.free_ram_mb = 10**9
    return hs


def with_snapshot(hs: HostState) -> Callable[[HostState], bool]:
    """A rebase_host as the cache's: DB snapshot plus the pending assumptions."""
    base = snap(hs.uuid, hs.host, free_ram_mb=10**9)

    def rebase_host(h: HostState) -> bool:
        assumptions.rebase(
            h,
            base,
            None,
            base_insts=(),
            aggregates=(),
            image_props=None,
            config=Config(),
            now=0.0,
            metrics=Counter(),
            touch=False,
            confirm=False,
        )
        return True

    return rebase_host


def consume_many(hs: HostState, n: int, rebase_host: Callable[[HostState], bool]) -> list[str]:
    uuids = [f"{hs.host}-{i}" for i in range(n)]
    for i, u in enumerate(uuids):
        assumptions.consume(
            hs, SPEC, u, placed=GPU, now=float(i), rebase_host=rebase_host, metrics=Counter()
        )
    return uuids


@pytest.mark.parametrize("n", [100, 1000, 30_000])
def test_release_with_snapshot_rebuilds_once(calls: Counter[str], n: int) -> None:
    hs = host("h")
    rebase_host = with_snapshot(hs)
    uuids = consume_many(hs, n, rebase_host)
    calls.clear()
    metrics: Counter[str] = Counter()
    # half of them: the host is rebuilt once, the other half re-applied once each
    assumptions.release(hs, uuids[: n // 2], rebase_host=rebase_host, metrics=metrics)
    assert calls["rebase"] == 1
    assert calls["apply_scalars"] == calls["reapply_placed"] == n - n // 2
    assert metrics["assumptions_released"] == n // 2
    assert hs.free_ram_mb == 10**9 - (n - n // 2) and len(hs.assumed) == n - n // 2
    calls.clear()
    assumptions.release(hs, uuids, rebase_host=rebase_host, metrics=metrics)
    assert calls["rebase"] == 1 and calls["apply_scalars"] == calls["reapply_placed"] == 0
    assert hs.free_ram_mb == 10**9 and hs.assumed == {} and hs.instances == set()


@pytest.mark.parametrize("n", [100, 1000, 30_000])
async def test_release_many_without_snapshot_is_linear(calls: Counter[str], n: int) -> None:
    cache = HostStateCache(Config())  # never started: no host has a DB snapshot
    hosts = [host("a"), host("b")]
    pairs = []
    for hs in hosts:
        for u in [f"{hs.host}-{i}" for i in range(n)]:
            cache.consume_locked(hs, SPEC, u, placed=GPU)
            pairs.append((hs, u))
    calls.clear()
    await cache.release_many(pairs)
    # every instance undone once, NUMA/PCI rebuilt once per host with nothing left to apply
    assert calls["unapply_scalars"] == 2 * n
    assert calls["rebuild_numa_pci"] == 2 and calls["reapply_placed"] == 0
    assert calls["apply_scalars"] == 0
    for hs in hosts:
        assert hs.free_ram_mb == 10**9 and hs.assumed == {} and hs.instances == set()
    assert cache.health()["assumptions_released"] == 2 * n


async def test_release_many_equals_one_by_one() -> None:
    a, b = HostStateCache(Config()), HostStateCache(Config())
    ha, hb = host("h"), host("h")
    for cache, hs in ((a, ha), (b, hb)):
        for i in range(20):
            cache.consume_locked(hs, SPEC, f"i{i}", placed=GPU if i % 3 else None)
    gone = [f"i{i}" for i in range(0, 20, 2)]
    await a.release_many([(ha, u) for u in gone])
    for u in gone:
        await b.release(hb, u)
    assert (ha.free_ram_mb, ha.vcpus_used, ha.num_instances) == (
        hb.free_ram_mb,
        hb.vcpus_used,
        hb.num_instances,
    )
    assert ha.instances == hb.instances and set(ha.assumed) == set(hb.assumed)
