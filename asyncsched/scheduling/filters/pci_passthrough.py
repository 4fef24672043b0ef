"""PciPassthroughFilter: the host must have free PCI devices for every PCI request.

Allocation candidates are pruned to those whose provider mapping the host's pools can follow
(nova's CandidateFilterMixin; the mapping matters only with PCI in Placement, so candidates
sharing the PCI providers are checked once). NUMA affinity is NUMATopologyFilter's job, as in
nova. Without candidates (rebuild, forced hosts) the host itself is judged.
"""

from __future__ import annotations

from typing import Any, ClassVar

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate, JudgedHostFilter
from asyncsched.scheduling.pci.stats import PciCheck, candidate_pci_key, pci_check_requests


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
        cache: dict[Any, PciCheck] = {}

        def check(mapping: Any) -> PciCheck:
            key = candidate_pci_key(requests, mapping)
            got = cache.get(key)
            if got is None:
                got = pci_check_requests(pools, requests, provider_mapping=mapping)
                cache[key] = got
            return got

        if not host.allocation_candidates:
            result = check(None)
            return result.code, result.detail
        good = []
        last = PciCheck()
        for cand in host.allocation_candidates:
            mappings = cand.get("mappings") if isinstance(cand, dict) else None
            result = check(mappings if isinstance(mappings, dict) else None)
            if result.ok:
                good.append(cand)
            else:
                last = result
        if prune:
            host.allocation_candidates[:] = good
        if not good:
            return last.code or "pci:no-fit", last.detail
        return None, ""
