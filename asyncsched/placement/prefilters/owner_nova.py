"""owner_nova_filter: only nova-owned providers (``OWNER_NOVA``) for the root and PCI groups.

nova 34 gates this on every nova-compute being version >= 73 (a per-request scatter-gather
query). asyncsched targets such clouds and always adds it, as real-peers.md observes nova do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from asyncsched.conf.options import Config
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec
from asyncsched.placement.prefilters.base import add_root_required
from asyncsched.placement.traits import OWNER_NOVA


def _pci_request_ids(spec: RequestSpec) -> set[str]:
    """Request ids of flavor-alias PCI requests (a Neutron-port request has no alias)."""
    if spec.pci_requests is None:
        return set()
    return {
        r.request_id
        for r in spec.pci_requests.requests
        if r.alias_name is not None and r.request_id
    }


def owner_nova_filter(
    ctx: RequestContext, spec: RequestSpec, config: Config, aggregates: Sequence[Aggregate]
) -> RequestSpec:
    if OWNER_NOVA in spec.request_level_params.root_required:
        return spec
    spec = add_root_required(spec, OWNER_NOVA)
    pci_ids = _pci_request_ids(spec)
    if pci_ids and spec.requested_resources:
        groups = tuple(
            replace(rg, required_traits=rg.required_traits | {OWNER_NOVA})
            if rg.requester_id and rg.requester_id.rsplit("-", 1)[0] in pci_ids
            else rg
            for rg in spec.requested_resources
        )
        spec = replace(spec, requested_resources=groups)
    return spec
