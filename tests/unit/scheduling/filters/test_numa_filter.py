"""NUMATopologyFilter and PciPassthroughFilter on HostCandidates with allocation candidates."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from asyncsched.conf.options import Config
from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import (
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NetworkMetadata,
    NUMATopologyLimits,
    RequestSpec,
)
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.filters.numa_topology import NUMATopologyFilter
from asyncsched.scheduling.filters.pci_passthrough import PciPassthroughFilter
from asyncsched.state.host_state import HostState
from tests.support.numa_data import (
    GIB_KB,
    dedicated_cell,
    full,
    guest,
    host,
    pci_request,
    pools,
    shared_cell,
    with_cells,
)

RP_A = "aaaaaaaa-0000-0000-0000-000000000000"  # PCI provider on NUMA node 0
RP_B = "bbbbbbbb-0000-0000-0000-000000000000"  # PCI provider on NUMA node 1


def _candidate(
    topo: HostNUMATopology | None,
    pci: tuple[PciDevicePool, ...] = (),
    candidates: list[dict[str, Any]] | None = None,
) -> HostCandidate:
    state = HostState(
        uuid=str(uuid.uuid4()),
        host="cmp1",
        nodename="cmp1",
        cell_uuid=str(uuid.uuid4()),
        numa_topology=topo,
        pci_pools=pci,
        cpu_allocation_ratio=4.0,
        ram_allocation_ratio=1.0,
    )
    return HostCandidate(state=state, allocation_candidates=list(candidates or []))


def _spec(
    numa: InstanceNUMATopology | None = None,
    pci: tuple[InstancePCIRequest, ...] = (),
    extra: dict[str, str] | None = None,
    image: ImageMetaProps | None = None,
    network: NetworkMetadata | None = None,
) -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(memory_mb=1024, vcpus=2, extra_specs=extra or {}),
        image=ImageMeta(properties=image or ImageMetaProps()),
        numa_topology=numa,
        pci_requests=InstancePCIRequests(requests=pci),
        network_metadata=network or NetworkMetadata(),
        instance_uuid=str(uuid.uuid4()),
    )


def _cand(name: str, **mappings: list[str]) -> dict[str, Any]:
    return {"name": name, "allocations": {}, "mappings": {"": ["root"], **mappings}}


@pytest.fixture
def numa_filter() -> NUMATopologyFilter:
    return NUMATopologyFilter(Config())


@pytest.fixture
def pci_filter() -> PciPassthroughFilter:
    return PciPassthroughFilter(Config())


def test_names() -> None:
    assert NUMATopologyFilter.name == "NUMATopologyFilter"
    assert PciPassthroughFilter.name == "PciPassthroughFilter"
    assert not NUMATopologyFilter.RUN_ON_REBUILD and not PciPassthroughFilter.RUN_ON_REBUILD


def test_is_active(numa_filter: NUMATopologyFilter, pci_filter: PciPassthroughFilter) -> None:
    assert not numa_filter.is_active(_spec())
    assert numa_filter.is_active(_spec(guest(shared_cell([0], 512))))
    assert numa_filter.is_active(
        _spec(
            extra={"hw:cpu_policy": "dedicated"},
            image=ImageMetaProps(hw_cpu_thread_policy="require"),
        )
    )
    assert not numa_filter.is_active(_spec(extra={"hw:cpu_policy": "dedicated"}))
    assert not pci_filter.is_active(_spec())
    assert pci_filter.is_active(_spec(pci=(pci_request("8086", "1520"),)))


def test_seed_case_passes_and_sets_limits(numa_filter: NUMATopologyFilter) -> None:
    hc = _candidate(host("seed_1g_one_cell.json"), candidates=[_cand("c1"), _cand("c2")])
    net = NetworkMetadata(physnets=frozenset({"physnet1"}))
    assert (
        numa_filter.host_passes(hc, _spec(guest(shared_cell([0], 2048, GIB_KB)), network=net))
        is None
    )
    assert [c["name"] for c in hc.allocation_candidates] == ["c1", "c2"]
    assert hc.limits["numa_topology"] == NUMATopologyLimits(
        cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0, network_metadata=net
    )


def test_precise_reason_and_detail(
    numa_filter: NUMATopologyFilter, caplog: pytest.LogCaptureFixture
) -> None:
    hc = _candidate(host("smt_dedicated.json"), candidates=[_cand("c1")])
    spec = _spec(guest(dedicated_cell([0, 1], 2048, pagesize=GIB_KB)))
    code, detail = numa_filter.diagnose(hc, spec)
    assert code == f"numa:pagesize-{GIB_KB}-unavailable"
    assert "host cell 0 offers no 1048576 KiB pages (offers 4, 2048)" in detail
    assert hc.allocation_candidates  # diagnose does not prune
    with caplog.at_level(logging.DEBUG, logger="asyncsched.scheduling.filters.numa_topology"):
        assert numa_filter.host_passes(hc, spec) == code
    assert hc.allocation_candidates == [] and "numa_topology" not in hc.limits
    assert "host cell 1 offers no 1048576 KiB pages" in caplog.text


def test_host_without_topology(numa_filter: NUMATopologyFilter) -> None:
    empty_guest = _spec(InstanceNUMATopology(cells=()))
    assert numa_filter.host_passes(_candidate(None), empty_guest) is None  # nova: falsy, passes
    assert numa_filter.host_passes(_candidate(None), _spec(guest(shared_cell([0], 1)))) == (
        "numa:host-no-topology"
    )


def test_require_threads_on_host_without_smt(numa_filter: NUMATopologyFilter) -> None:
    spec = _spec(extra={"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require"})
    assert numa_filter.host_passes(_candidate(host("nosmt_dedicated.json")), spec) == (
        "numa:no-threads"
    )
    assert numa_filter.host_passes(_candidate(host("smt_dedicated.json")), spec) is None


def test_no_candidates_judges_the_host(numa_filter: NUMATopologyFilter) -> None:
    topo = host("smt_dedicated.json")
    assert (
        numa_filter.host_passes(_candidate(topo), _spec(guest(dedicated_cell(range(8), 1)))) is None
    )
    assert numa_filter.host_passes(_candidate(topo), _spec(guest(dedicated_cell(range(9), 1)))) == (
        "numa:no-pinned-cpus"
    )


def test_numa_filter_prunes_candidates_by_pci_provider(numa_filter: NUMATopologyFilter) -> None:
    """PCI in Placement: the candidate whose GPU sits on the wrong NUMA node is dropped."""
    seed = host("seed_1g_one_cell.json")
    topo = with_cells(seed, c1=full(seed.cells[1]))  # the guest can only land on cell 0
    hc = _candidate(
        topo,
        pools("pci_pools_placement.json"),
        [_cand("gpu-on-1", **{"r1-0": [RP_B]}), _cand("gpu-on-0", **{"r1-0": [RP_A]})],
    )
    spec = _spec(
        guest(shared_cell([0], 512)),
        (pci_request("10de", "1eb8", 1, policy="required", request_id="r1"),),
    )
    assert numa_filter.host_passes(hc, spec) is None
    assert [c["name"] for c in hc.allocation_candidates] == ["gpu-on-0"]

    hc = _candidate(
        topo, pools("pci_pools_placement.json"), [_cand("gpu-on-1", **{"r1-0": [RP_B]})]
    )
    assert numa_filter.host_passes(hc, spec) == "pci:wrong-numa-node"
    assert hc.allocation_candidates == []


def test_pci_filter(pci_filter: PciPassthroughFilter) -> None:
    spec = _spec(pci=(pci_request("10de", "1eb8", 2, request_id="r1"),))
    assert pci_filter.host_passes(_candidate(None), spec) == "pci:no-devices"
    placed = pools("pci_pools_placement.json")
    hc = _candidate(
        None,
        placed,
        [
            _cand("split", **{"r1-0": [RP_A], "r1-1": [RP_B]}),
            _cand(
                "elsewhere", **{"r1-0": ["cccccccc-0000-0000-0000-000000000000"], "r1-1": [RP_B]}
            ),
            _cand("both-a", **{"r1-0": [RP_A], "r1-1": [RP_A]}),
        ],
    )
    assert pci_filter.host_passes(hc, spec) is None
    assert [c["name"] for c in hc.allocation_candidates] == ["split", "both-a"]
    too_many = _spec(pci=(pci_request("10de", "1eb8", 5, request_id="r1"),))
    hc = _candidate(None, placed)
    assert pci_filter.host_passes(hc, too_many) == "pci:not-enough-devices"
    code, detail = pci_filter.diagnose(hc, too_many)
    assert code == "pci:not-enough-devices" and "5 device(s)" in detail
    assert pci_filter.host_passes(hc, _spec()) is None


def test_filters_survive_odd_candidates(
    numa_filter: NUMATopologyFilter, pci_filter: PciPassthroughFilter
) -> None:
    odd: list[dict[str, Any]] = [{"allocations": {}}, {"mappings": None}, {"mappings": []}]
    hc = _candidate(host("seed_1g_one_cell.json"), pools("pci_pools.json"), odd)
    spec = _spec(guest(shared_cell([0], 512)), (pci_request("8086", "1520"),))
    assert numa_filter.host_passes(hc, spec) is None
    assert pci_filter.host_passes(hc, spec) is None
    assert len(hc.allocation_candidates) == 3


def test_a_bug_costs_one_host_not_the_request(
    numa_filter: NUMATopologyFilter,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from asyncsched.resources.numa import consume, consume_numa_pci
    from asyncsched.scheduling.filters import numa_topology

    def boom(*args: object, **kwargs: object) -> None:
        raise ZeroDivisionError("simulated bug")

    monkeypatch.setattr(numa_topology, "numa_fit_instance_to_host", boom)
    monkeypatch.setattr(consume, "numa_fit_instance_to_host", boom)
    topo = host("seed_1g_one_cell.json")
    hc = _candidate(topo)
    spec = _spec(guest(shared_cell([0], 512)))
    with caplog.at_level(logging.ERROR):
        assert numa_filter.host_passes(hc, spec) == "numa:internal-error"
        assert consume_numa_pci(hc.state, spec, limits=None, provider_mapping=None) == (
            None,
            None,
            None,
        )
    assert hc.state.numa_topology is topo
    assert "simulated bug" in caplog.text
