"""Re-applying a pending NUMA placement over fresh database values respects the overcommit
limits it was fitted under (memory and shared CPUs), and pinned guests' no-overcommit rule:
where the cell has no room left any more the guest is fitted afresh, as a taken pinning is."""

from __future__ import annotations

from dataclasses import replace

from asyncsched.objects.host_resources import HostNUMACell, HostNUMATopology, NUMAPagesTopology
from asyncsched.objects.models import InstanceNUMACell, InstanceNUMATopology, NUMATopologyLimits
from asyncsched.resources.numa.consume import numa_usage_conflict, reapply_placed
from asyncsched.resources.numa.fit import numa_fit_instance_to_host
from asyncsched.resources.numa.placed import PlacedNumaPci

LIMITS = NUMATopologyLimits(cpu_allocation_ratio=2.0, ram_allocation_ratio=1.5)


def _cell(cid: int, pages: bool = False) -> HostNUMACell:
    return HostNUMACell(
        id=cid,
        cpuset=frozenset({cid * 4, cid * 4 + 1}),
        pcpuset=frozenset({cid * 4 + 2, cid * 4 + 3}),
        memory=4096,
        siblings=tuple(frozenset({c}) for c in range(cid * 4, cid * 4 + 4)),
        mempages=(NUMAPagesTopology(size_kb=4, total=4096 * 256),) if pages else (),
    )


def _placed(host: HostNUMATopology, guest: InstanceNUMATopology) -> PlacedNumaPci:
    fit = numa_fit_instance_to_host(host, guest, limits=LIMITS)
    assert fit.fitted is not None and fit.fitted.cells[0].id == 0
    return PlacedNumaPci(fitted=fit.fitted, requested=guest, limits=LIMITS)


def test_shared_guest_past_the_ram_allocation_ratio_is_fitted_afresh() -> None:
    host = HostNUMATopology(cells=(_cell(0), _cell(1)))
    guest = InstanceNUMATopology(
        cells=(InstanceNUMACell(id=0, cpuset=frozenset({0}), memory=1024, cpu_policy="shared"),)
    )
    placed = _placed(host, guest)
    assert placed.fitted is not None
    # the database now reports cell 0 nearly full: 5800 + 1024 > 4096 x 1.5
    fresh = HostNUMATopology(cells=(replace(host.cells[0], memory_usage=5800), host.cells[1]))
    assert "memory usage would be 6824" in (numa_usage_conflict(fresh, placed.fitted, LIMITS) or "")
    assert numa_usage_conflict(fresh, placed.fitted) is None  # without limits: as before
    r = reapply_placed(placed, fresh, ())
    assert r.refitted and r.conflict is None and r.fitted is not None
    assert r.fitted.cells[0].id == 1
    assert r.numa_topology is not None
    assert [c.memory_usage for c in r.numa_topology.cells] == [5800, 1024]


def test_shared_cpus_past_the_cpu_allocation_ratio_conflict() -> None:
    host = HostNUMATopology(cells=(_cell(0), _cell(1)))
    guest = InstanceNUMATopology(
        cells=(InstanceNUMACell(id=0, cpuset=frozenset({0, 1}), memory=256, cpu_policy="shared"),)
    )
    placed = _placed(host, guest)
    assert placed.fitted is not None
    fresh = HostNUMATopology(cells=(replace(host.cells[0], cpu_usage=3), host.cells[1]))
    assert "shared CPU usage would be 5, limit 4" in (
        numa_usage_conflict(fresh, placed.fitted, LIMITS) or ""
    )


def test_pinned_guest_never_overcommits_memory_on_re_apply() -> None:
    host = HostNUMATopology(cells=(_cell(0, pages=True), _cell(1, pages=True)))
    guest = InstanceNUMATopology(
        cells=(InstanceNUMACell(id=0, pcpuset=frozenset({0}), memory=1024, cpu_policy="dedicated"),)
    )
    placed = _placed(host, guest)
    assert placed.fitted is not None
    small = host.cells[0].mempages[0]
    used = replace(small, used=small.total - 100 * 256)  # 100 MiB of small pages left
    fresh = HostNUMATopology(cells=(replace(host.cells[0], mempages=(used,)), host.cells[1]))
    assert "100 MiB free for a pinned guest" in (numa_usage_conflict(fresh, placed.fitted) or "")
    r = reapply_placed(placed, fresh, ())
    assert r.refitted and r.fitted is not None and r.fitted.cells[0].id == 1
