"""PciPassthroughFilter: the host must have free PCI devices for every PCI request.

Allocation candidates are pruned to those whose provider mapping the host's pools can follow
(nova's CandidateFilterMixin; the mapping matters only with PCI in Placement, so candidates
sharing the PCI providers are checked once). NUMA affinity is NUMATopologyFilter's job, as in
nova. Without candidates (rebuild, forced hosts) the host itself is judged.
"""

from __future__ import annotations

from typing import ClassVar

from asyncsched.objects.models import RequestSpec
from asyncsched.resources.pci.stats import candidate_pci_key, pci_check_requests
from asyncsched.scheduling.filters.base import HostCandidate, JudgedHostFilter


class PciPassthroughFilter(JudgedHostFilter):
    """Filter on PCI device availability (flavor aliases and SR-IOV ports)."""

    name: ClassVar[str] = "PciPassthroughFilter"
    RUN_ON_REBUILD: ClassVar[bool] = False
    reason_prefix: ClassVar[str] = "pci"

    def is_active(self, spec: RequestSpec) -> bool:
        return spec.pci_requests is not None and bool(spec.pci_requests.requests)

    def judge(
        self, host: HostCandidate, spec: RequestSpec, *, prune: bool
    ) -> tuple[str | None, str]:
        if spec.pci_requests is None or not spec.pci_requests.requests:
            return None, ""
        requests = spec.pci_requests.requests
        pools = host.state.pci_pools
        if not pools:
            return "pci:no-devices", "the host reports no PCI device pools"
        return self.judge_candidates(
            host,
            lambda mapping: pci_check_requests(pools, requests, provider_mapping=mapping),
            prune=prune,
            memo_key=lambda m: candidate_pci_key(requests, m),
        )
