"""NUMA fits that differed from nova 34's, on the minimal cases the parity suite
(tests/parity) found. Expected pinnings are what nova 34's numa_fit_instance_to_host gives."""

from __future__ import annotations

from dataclasses import replace

import pytest

from asyncsched.objects.host_resources import HostNUMACell, HostNUMATopology, NUMAPagesTopology
from asyncsched.objects.models import (
    Flavor,
    InstanceNUMACell,
    InstanceNUMATopology,
    NUMATopologyLimits,
    RequestSpec,
)
from asyncsched.resources.numa.consume import place_numa_pci
from asyncsched.resources.numa.fit import numa_fit_instance_to_host
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.filters.numa_topology import NUMATopologyFilter
from asyncsched.state.host_state import HostState
from tests.support.sched_helpers import config

LIMITS = NUMATopologyLimits(cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)


def _cell(cid: int, shared: range, dedicated: range) -> HostNUMACell:
    return HostNUMACell(
        id=cid,
        cpuset=frozenset(shared),
        pcpuset=frozenset(dedicated),
        memory=4096,
        siblings=tuple(frozenset({c}) for c in sorted([*shared, *dedicated])),
        mempages=(NUMAPagesTopology(size_kb=4, total=4096 * 256, used=0),),
    )


#: two cells, each with two shared and two dedicated CPUs, no SMT
HOST = HostNUMATopology(
    cells=(_cell(0, range(0, 2), range(2, 4)), _cell(1, range(4, 6), range(6, 8)))
)


def _mixed(
    mask: int, thread: str | None = None, emulator: str | None = None
) -> InstanceNUMATopology:
    """2 vCPUs, hw:cpu_policy=mixed, hw:cpu_dedicated_mask=<mask>, hw:numa_nodes=2: the other
    guest cell gets no dedicated vCPU at all."""

    def cell(vcpu: int) -> InstanceNUMACell:
        dedicated = vcpu == mask
        return InstanceNUMACell(
            id=vcpu,
            cpuset=frozenset() if dedicated else frozenset({vcpu}),
            pcpuset=frozenset({vcpu}) if dedicated else frozenset(),
            memory=256,
            cpu_policy="mixed",
            cpu_thread_policy=thread,
        )

    return InstanceNUMATopology(cells=(cell(0), cell(1)), emulator_threads_policy=emulator)


def _fit(guest: InstanceNUMATopology) -> list[tuple[int, dict[int, int], frozenset[int] | None]]:
    result = numa_fit_instance_to_host(HOST, guest, limits=LIMITS)
    assert result.fitted is not None, result.detail
    return [(c.id, dict(c.cpu_pinning or {}), c.cpuset_reserved) for c in result.fitted.cells]


def test_mixed_guest_cell_without_dedicated_vcpus_fits_with_an_empty_pinning() -> None:
    assert _fit(_mixed(0)) == [(0, {0: 2}, None), (1, {}, None)]
    assert _fit(_mixed(1)) == [(0, {}, None), (1, {1: 6}, None)]
    # the isolated emulator thread goes with the first guest cell, which has a pinning here
    assert _fit(_mixed(0, emulator="isolate")) == [(0, {0: 2}, frozenset({3})), (1, {}, None)]


@pytest.mark.parametrize(
    ("mask", "thread", "emulator"),
    [(1, None, "isolate"), (0, "require", None), (0, "isolate", None)],
    ids=["emulator-isolate-on-an-empty-cell", "require-without-smt", "thread-isolate"],
)
def test_empty_pinning_still_fails_where_nova_fails(
    mask: int, thread: str | None, emulator: str | None
) -> None:
    result = numa_fit_instance_to_host(HOST, _mixed(mask, thread, emulator), limits=LIMITS)
    assert result.fitted is None


def test_packing_strategy_option_picks_the_most_used_cell() -> None:
    used = replace(HOST.cells[1], memory_usage=2048, cpu_usage=1)
    host = HostNUMATopology(cells=(HOST.cells[0], used))
    guest = InstanceNUMATopology(
        cells=(InstanceNUMACell(id=0, cpuset=frozenset({0}), memory=256, cpu_policy="shared"),)
    )
    spread = numa_fit_instance_to_host(host, guest, limits=LIMITS)
    packed = numa_fit_instance_to_host(host, guest, limits=LIMITS, pack=True)
    assert spread.fitted is not None and packed.fitted is not None
    assert (spread.fitted.cells[0].id, packed.fitted.cells[0].id) == (0, 1)
    # the filter and the consume read [compute] packing_host_numa_cells_allocation_strategy
    for pack, cell in ((False, 0), (True, 1)):
        conf = config(compute={"packing_host_numa_cells_allocation_strategy": pack})
        state = HostState(uuid="u", host="h", nodename="h", cell_uuid="c", numa_topology=host)
        s = RequestSpec(flavor=Flavor(memory_mb=256, vcpus=1), numa_topology=guest)
        assert NUMATopologyFilter(conf).host_passes(HostCandidate(state), s) is None
        placed = place_numa_pci(
            state,
            s,
            limits=LIMITS,
            provider_mapping=None,
            pack=conf.compute.packing_host_numa_cells_allocation_strategy,
        )
        assert placed is not None and placed.fitted is not None and placed.pack is pack
        assert placed.fitted.cells[0].id == cell
