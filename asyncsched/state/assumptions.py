"""Pending consumption: a host's numbers are its DB snapshot plus the assumptions still
pending on it, so refresh, release and expiry are one operation (``rebase``).

An ``Assumption`` is what a request made on a host (and Placement accepted) before the cell
database shows it. NUMA/PCI usage is kept as what was placed (``PlacedNumaPci``) and
re-applied in order over the fresh topology and pools; one that no longer fits is fitted
afresh or left out, logged and counted (``assumptions_refitted`` / ``assumptions_unfit``).

Everything here is linear in the instances of the host: ``release`` takes any number of
instances of one host and rebuilds the host once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import replace

from asyncsched.common.clock import utcnow
from asyncsched.conf.options import Config
from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import Aggregate, RequestSpec
from asyncsched.resources.numa.consume import reapply_placed
from asyncsched.state.host_state import Assumption, HostState, PlacedNumaPci, ServiceInfo
from asyncsched.state.images import ImageProps
from asyncsched.state.rows import (
    IMAGE_PROP_COUNTS_KEY,
    IMAGE_PROPS_KEY,
    NodeSnapshot,
    image_prop_counts,
    resolve_ratios,
)

LOG = logging.getLogger(__name__)

# Recompute a host from its snapshot and pending assumptions (caller holds the lock);
# False when the host has no snapshot (it left the table).
RebaseHost = Callable[[HostState], bool]


def apply_scalars(hs: HostState, a: Assumption) -> None:
    """nova's consume_from_request arithmetic for one instance (scalars; NUMA/PCI are
    rebuilt by ``rebuild_numa_pci``)."""
    hs.free_ram_mb -= a.memory_mb
    hs.free_disk_mb -= a.disk_mb
    hs.vcpus_used += a.vcpus
    hs.num_instances += 1
    hs.num_io_ops += 1


def unapply_scalars(hs: HostState, a: Assumption) -> None:
    """Inverse arithmetic, for a host that has no DB snapshot to rebase on."""
    hs.free_ram_mb += a.memory_mb
    hs.free_disk_mb += a.disk_mb
    hs.vcpus_used -= a.vcpus
    hs.num_instances -= 1
    hs.num_io_ops -= 1


def rebase(
    hs: HostState,
    snap: NodeSnapshot,
    service: ServiceInfo | None,
    *,
    base_insts: Collection[str],
    aggregates: tuple[Aggregate, ...],
    image_props: Mapping[str, ImageProps] | None,
    config: Config,
    now: float,
    metrics: dict[str, int],
    touch: bool = True,
    confirm: bool = True,
) -> None:
    """DB snapshot + pending assumptions -> host fields (caller holds ``hs.lock``).

    ``confirm``: this follows a read of compute_nodes, so an assumed instance now listed on
    the host is counted in the row and its assumption goes. ``image_props`` None: not
    wanted (the host's image-property extras are dropped)."""
    ttl = config.asyncsched.assumed_ttl
    for a in list(hs.assumed.values()):
        if confirm and a.instance_uuid in base_insts:
            del hs.assumed[a.instance_uuid]
            metrics["assumptions_confirmed"] += 1
        elif now - a.created > ttl:
            del hs.assumed[a.instance_uuid]
            metrics["assumptions_expired"] += 1
            LOG.info(
                "assumed consumption of instance %s on %s expired after %.0fs unreported",
                a.instance_uuid,
                hs.nodename,
                ttl,
            )
    cpu, ram, disk = resolve_ratios(snap, config.default)
    hs.compute_node_id = snap.compute_node_id
    hs.total_usable_ram_mb = snap.total_usable_ram_mb
    hs.free_ram_mb = snap.free_ram_mb
    hs.total_usable_disk_gb = snap.total_usable_disk_gb
    hs.disk_mb_used = snap.disk_mb_used
    hs.free_disk_mb = snap.free_disk_mb
    hs.vcpus_total = snap.vcpus_total
    hs.vcpus_used = snap.vcpus_used
    hs.cpu_allocation_ratio = cpu
    hs.ram_allocation_ratio = ram
    hs.disk_allocation_ratio = disk
    hs.num_instances = snap.num_instances
    hs.num_io_ops = snap.num_io_ops
    hs.failed_builds = snap.failed_builds
    hs.stats = snap.stats
    hs.host_ip = snap.host_ip
    hs.hypervisor_type = snap.hypervisor_type
    hs.hypervisor_version = snap.hypervisor_version
    hs.hypervisor_hostname = snap.nodename
    hs.cpu_info = snap.cpu_info
    hs.supported_instances = snap.supported_instances
    hs.metrics = snap.metrics
    hs.aggregates = aggregates
    hs.service = service
    hs.instances = set(base_insts)
    if hs.assumed:
        for a in sorted(hs.assumed.values(), key=lambda a: a.created):
            apply_scalars(hs, a)
            hs.instances.add(a.instance_uuid)
        rebuild_numa_pci(hs, snap.numa_topology, snap.pci_pools, metrics)
    else:
        hs.numa_topology = snap.numa_topology
        hs.pci_pools = snap.pci_pools
        hs.updated = snap.updated
    if image_props is not None:
        images = {u: p for u in hs.instances if (p := image_props.get(u)) is not None}
        hs.extra[IMAGE_PROPS_KEY] = images
        hs.extra[IMAGE_PROP_COUNTS_KEY] = image_prop_counts(images, images)
    elif IMAGE_PROPS_KEY in hs.extra or IMAGE_PROP_COUNTS_KEY in hs.extra:
        hs.extra.pop(IMAGE_PROPS_KEY, None)
        hs.extra.pop(IMAGE_PROP_COUNTS_KEY, None)
    if touch:
        hs.touch()


def rebuild_numa_pci(
    hs: HostState,
    topo: HostNUMATopology | None,
    pools: tuple[PciDevicePool, ...],
    metrics: dict[str, int],
) -> None:
    """``hs`` NUMA topology and PCI pools = base values + each pending assumption applied
    in order (caller holds ``hs.lock``). Each assumption's ``numa_before``/``pci_before``
    is kept equal to the values just before it in this chain."""
    for a in sorted(hs.assumed.values(), key=lambda x: x.created):
        p = a.placed
        if p is None:
            continue
        r = reapply_placed(p, topo, pools)
        if r.refitted:
            metrics["assumptions_refitted"] += 1
            LOG.warning(
                "pinning of pending instance %s no longer fits %s; fitted it afresh",
                a.instance_uuid,
                hs.nodename,
            )
        if r.conflict != a.conflict:
            if r.conflict is None:
                LOG.info(
                    "pending NUMA/PCI usage of instance %s fits %s again",
                    a.instance_uuid,
                    hs.nodename,
                )
            else:
                metrics["assumptions_unfit"] += 1
                LOG.warning(
                    "pending NUMA/PCI usage of instance %s does not fit %s (%s);"
                    " not counted until it does",
                    a.instance_uuid,
                    hs.nodename,
                    r.conflict,
                )
        if (
            r.fitted is not p.fitted
            or p.numa_before is not topo
            or p.pci_before is not pools
            or r.conflict != a.conflict
        ):
            a = replace(
                a,
                conflict=r.conflict,
                placed=replace(p, fitted=r.fitted, numa_before=topo, pci_before=pools),
            )
            hs.assumed[a.instance_uuid] = a
        topo, pools = r.numa_topology, r.pci_pools
    hs.numa_topology = topo
    hs.pci_pools = pools


def rebuild_without_snapshot(
    hs: HostState, released: Iterable[Assumption], metrics: dict[str, int]
) -> None:
    """NUMA/PCI of a host with no DB snapshot: the values before the oldest pending (or
    just released) assumption that carries them, plus the pending ones re-applied."""
    chain = sorted([*hs.assumed.values(), *released], key=lambda x: x.created)
    for x in chain:
        p = x.placed
        if p is not None:
            base = p.pci_before if p.pci_before is not None else hs.pci_pools
            rebuild_numa_pci(hs, p.numa_before, base, metrics)
            return


def consume(
    hs: HostState,
    spec: RequestSpec,
    instance_uuid: str,
    *,
    placed: PlacedNumaPci | None,
    now: float,
    rebase_host: RebaseHost,
    metrics: dict[str, int],
) -> None:
    """Apply one instance's consumption to ``hs`` (caller holds ``hs.lock``) and keep it as
    an assumption; the same instance again is counted once."""
    flavor = spec.flavor
    if placed is not None and placed.empty:
        placed = None
    after = placed
    if placed is not None:  # the "after" values go stale at the next rebuild: not kept
        placed = replace(placed, numa_after=None, pci_after=None)
    a = Assumption(
        instance_uuid=instance_uuid,
        memory_mb=int(flavor.memory_mb),
        disk_mb=int(flavor.root_gb + flavor.ephemeral_gb) * 1024,
        vcpus=int(flavor.vcpus),
        created=now,
        placed=placed,
    )
    prev = hs.assumed.get(instance_uuid)
    hs.assumed[instance_uuid] = a
    if prev is None:
        apply_scalars(hs, a)
        if after is not None:
            if after.numa_after is not None:
                hs.numa_topology = after.numa_after
            if after.pci_after is not None:
                hs.pci_pools = after.pci_after
    elif not rebase_host(hs):
        unapply_scalars(hs, prev)
        apply_scalars(hs, a)
        rebuild_without_snapshot(hs, (prev,), metrics)
    hs.instances.add(instance_uuid)
    hs.updated = utcnow()
    hs.touch()


def release(
    hs: HostState,
    instance_uuids: Iterable[str],
    *,
    rebase_host: RebaseHost,
    metrics: dict[str, int],
) -> int:
    """Take these instances' assumptions off ``hs`` (caller holds ``hs.lock``) and rebuild
    the host once: from its DB snapshot, else by undoing the arithmetic and rebuilding
    NUMA/PCI from before the oldest one. Returns how many were released."""
    released = [a for u in instance_uuids if (a := hs.assumed.pop(u, None)) is not None]
    if not released:
        return 0
    metrics["assumptions_released"] += len(released)
    if not rebase_host(hs):  # not in the table: undo the arithmetic by hand
        for a in released:
            unapply_scalars(hs, a)
        rebuild_without_snapshot(hs, released, metrics)
        for a in released:
            hs.instances.discard(a.instance_uuid)
    hs.touch()
    return len(released)
