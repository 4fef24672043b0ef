"""Apply a chosen host's NUMA and PCI consumption to its cached HostState.

Called by the scheduler core right after a host is chosen for one instance, so the next
instance of a multi-create (and concurrent requests) see the pinned CPUs, memory, pages and PCI
devices as used. nova does the same in HostState.consume_from_request.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import InstanceNUMATopology, NUMATopologyLimits, RequestSpec
from asyncsched.scheduling.numa.fit import numa_fit_instance_to_host
from asyncsched.scheduling.numa.usage import numa_usage_from_instance
from asyncsched.scheduling.pci.stats import PciRequestFailed, pci_apply_requests
from asyncsched.state.host_state import HostState

LOG = logging.getLogger(__name__)


def consume_numa_pci(
    host: HostState,
    spec: RequestSpec,
    *,
    limits: NUMATopologyLimits | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
) -> tuple[HostNUMATopology | None, tuple[PciDevicePool, ...] | None, InstanceNUMATopology | None]:
    """Fit once more on the live state and record the usage on ``host``.

    The caller must hold ``host.lock``. Returns ``(new host topology, new PCI pools, fitted
    guest topology)``: each None when not applicable (no NUMA / PCI request, or it no longer
    fits because the state moved on; that is logged, never raised, and the host state is left
    as it was for that part). ``provider_mapping`` is the claimed candidate's ``mappings``.
    The fitted guest topology carries the pinning (nova stores it back into the RequestSpec).
    """
    try:
        return _consume(host, spec, limits=limits, provider_mapping=provider_mapping)
    except Exception:  # the claim already succeeded in Placement: never lose the request
        LOG.exception(
            "recording NUMA/PCI usage of instance %s on %s failed",
            spec.instance_uuid,
            host.nodename,
        )
        return None, None, None


def _consume(
    host: HostState,
    spec: RequestSpec,
    *,
    limits: NUMATopologyLimits | None,
    provider_mapping: Mapping[str, Sequence[str]] | None,
) -> tuple[HostNUMATopology | None, tuple[PciDevicePool, ...] | None, InstanceNUMATopology | None]:
    requests = spec.pci_requests.requests if spec.pci_requests is not None else ()
    host_topo = host.numa_topology
    fitted: InstanceNUMATopology | None = None
    new_topo: HostNUMATopology | None = None
    new_pools: tuple[PciDevicePool, ...] | None = None
    changed = False

    if host_topo is not None and spec.numa_topology is not None and spec.numa_topology.cells:
        result = numa_fit_instance_to_host(
            host_topo,
            spec.numa_topology,
            limits=limits,
            pci_requests=requests,
            pci_pools=host.pci_pools,
            provider_mapping=provider_mapping,
        )
        if result.fitted is None:
            LOG.warning(
                "instance %s no longer fits the NUMA topology of %s (%s): %s",
                spec.instance_uuid,
                host.nodename,
                result.code,
                result.detail,
            )
        else:
            fitted = result.fitted
            new_topo = numa_usage_from_instance(host_topo, fitted)
            host.numa_topology = new_topo
            changed = True

    if requests and host.pci_pools:
        try:
            new_pools = pci_apply_requests(
                host.pci_pools,
                requests,
                provider_mapping=provider_mapping,
                numa_cells=fitted.cells if fitted is not None else None,
                host_topology=host_topo,
            )
        except PciRequestFailed as exc:
            LOG.warning(
                "PCI requests of instance %s no longer fit %s (%s): %s",
                spec.instance_uuid,
                host.nodename,
                exc.check.code,
                exc.check.detail,
            )
        else:
            host.pci_pools = new_pools
            changed = True

    if changed:
        host.touch()
    return new_topo, new_pools, fitted
