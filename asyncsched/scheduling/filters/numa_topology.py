"""NUMATopologyFilter: the guest's NUMA topology must fit the host's (nova's semantics).

Per allocation candidate (nova's CandidateFilterMixin) the guest cells are fitted onto the host
cells with the candidate's provider mapping (which decides the PCI providers when PCI is in
Placement); candidates that do not fit are pruned and the host fails when none remains. The fit
depends on a candidate only through the PCI providers it maps, so candidates sharing those are
fitted once. Without candidates (rebuild, forced hosts) the host itself is judged.

The reason code names the failure precisely ("numa:no-pinned-cpus",
"numa:pagesize-1048576-unavailable", "pci:wrong-numa-node", ...); ``diagnose`` returns the
sentence per host cell that nova never tells operators.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from asyncsched.objects.models import InstancePCIRequest, NUMATopologyLimits, RequestSpec
from asyncsched.resources.numa.fit import FitResult, numa_fit_instance_to_host
from asyncsched.resources.pci.stats import candidate_pci_key
from asyncsched.scheduling.filters.base import HostCandidate, JudgedHostFilter


def _wants_dedicated_require(spec: RequestSpec) -> bool:
    extra = spec.flavor.extra_specs
    props = spec.image_props
    policies = (extra.get("hw:cpu_policy"), props.hw_cpu_policy)
    threads = (extra.get("hw:cpu_thread_policy"), props.hw_cpu_thread_policy)
    return "dedicated" in policies and "require" in threads


def _pci_requests(spec: RequestSpec) -> Sequence[InstancePCIRequest]:
    return spec.pci_requests.requests if spec.pci_requests is not None else ()


class NUMATopologyFilter(JudgedHostFilter):
    """Filter on the requested NUMA topology, pinning, page sizes and PCI/network affinity."""

    name: ClassVar[str] = "NUMATopologyFilter"
    RUN_ON_REBUILD: ClassVar[bool] = False
    reason_prefix: ClassVar[str] = "numa"

    def is_active(self, spec: RequestSpec) -> bool:
        return spec.numa_topology is not None or _wants_dedicated_require(spec)

    def judge(
        self, host: HostCandidate, spec: RequestSpec, *, prune: bool
    ) -> tuple[str | None, str]:
        state = host.state
        topo = state.numa_topology
        if topo is not None and _wants_dedicated_require(spec) and not topo.has_threads:
            return (
                "numa:no-threads",
                "thread policy require was requested but the host has no SMT siblings",
            )
        requested = spec.numa_topology
        if requested is None or not requested.cells:
            return None, ""
        if topo is None or not topo.cells:
            return "numa:host-no-topology", "the guest has a NUMA topology, the host reports none"
        limits = NUMATopologyLimits(
            cpu_allocation_ratio=state.cpu_allocation_ratio,
            ram_allocation_ratio=state.ram_allocation_ratio,
            network_metadata=spec.network_metadata,
        )
        requests = _pci_requests(spec)

        def fit(mapping: Mapping[str, Sequence[str]] | None) -> FitResult:
            return numa_fit_instance_to_host(
                topo,
                requested,
                limits=limits,
                pci_requests=requests,
                pci_pools=state.pci_pools,
                provider_mapping=mapping,
            )

        code, detail = self.judge_candidates(
            host, fit, prune=prune, memo_key=lambda m: candidate_pci_key(requests, m)
        )
        if code is None and prune:
            host.limits["numa_topology"] = limits
        return code, detail
