"""PCI device pool accounting: nova's PciDeviceStats semantics on immutable pools.

``pci_check_requests`` answers "can these pools satisfy these requests?" with a precise reason;
``pci_apply_requests`` returns the pools after consuming them. Both work on a cheap working copy
(``[match dict, count]`` pairs), never on the shared host values.

Semantics follow nova/pci/stats.py: pools are tried in order of fewest keys first, specs match
case-insensitively on any key, PFs / VDPA / remote-managed devices are only used when asked for,
NUMA affinity policies required > socket > legacy > preferred, and with PCI in Placement each
request consumes exactly from the resource providers its request groups were allocated from.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from asyncsched.common.strings import bool_from_string
from asyncsched.exceptions import AsyncschedError
from asyncsched.objects.host_resources import HostNUMATopology, PciDevicePool
from asyncsched.objects.models import InstanceNUMACell, InstancePCIRequest

LOG = logging.getLogger(__name__)

POLICY_REQUIRED = "required"
POLICY_LEGACY = "legacy"
POLICY_PREFERRED = "preferred"
POLICY_SOCKET = "socket"

DEV_TYPE_PF = "type-PF"
DEV_TYPE_VDPA = "vdpa"

# Matched by Placement, not here (nova's ignored_spec_tags / ignored_pool_tags).
_IGNORED_SPEC_KEYS = frozenset({"resource_class", "traits", "rp_uuids"})
_IGNORED_POOL_KEYS = frozenset({"resource_class", "traits", "rp_uuid"})


@dataclass(frozen=True, slots=True)
class PciCheck:
    """Outcome of matching PCI requests against pools: ``code`` None means it fits."""

    code: str | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.code is None


_OK = PciCheck()


class _Pool:
    """Working copy of one pool: the flat match dict plus a mutable count."""

    __slots__ = ("count", "index", "match", "numa_node", "rp_uuid", "source")

    def __init__(self, index: int, pool: PciDevicePool) -> None:
        self.index = index
        self.source = pool
        self.count = pool.count
        self.numa_node = pool.numa_node
        self.rp_uuid = pool.tags.get("rp_uuid")
        m = pool.as_match_dict()
        for k in _IGNORED_POOL_KEYS:
            m.pop(k, None)
        self.match = m


def _bool_str(value: Any) -> bool:
    return isinstance(value, str) and bool_from_string(value)


def _lower(v: Any) -> Any:
    return v.lower() if isinstance(v, str) else v


def _spec_matches(pool: _Pool, spec: Mapping[str, Any]) -> bool:
    m = pool.match
    for k, v in spec.items():
        pv = m.get(k)
        if isinstance(v, list) and isinstance(pv, list):
            if not all(x in pv for x in v):
                return False
        elif _lower(pv) != _lower(v):
            return False
    return True


def _count(pools: Sequence[_Pool]) -> int:
    return sum(p.count for p in pools)


def _rp_uuids_for_request(
    request: InstancePCIRequest, provider_mapping: Mapping[str, Sequence[str]] | None
) -> list[str]:
    """The providers (one entry per device) Placement allocated this request from, if any."""
    if request.alias_name is None:
        return []  # neutron-port requests are not in Placement: any pool will do
    if not provider_mapping:
        # After the claim the compute stores the mapping in the spec; without it (or with
        # pci_in_placement off) any pool may serve the request.
        raw = request.spec[0].get("rp_uuids") if request.spec else None
        return [u for u in str(raw).split(",") if u] if raw else []
    rid = request.request_id or ""
    # The PCI prefilter names groups "<request_id>-<n>", each fulfilled from one provider.
    return [rps[0] for gid, rps in provider_mapping.items() if gid.startswith(rid) and rps]


def candidate_pci_key(
    requests: Sequence[InstancePCIRequest], provider_mapping: Mapping[str, Sequence[str]] | None
) -> tuple[tuple[str, ...], ...]:
    """What of an allocation candidate's mapping the PCI (and so NUMA) fit depends on.

    Candidates with equal keys get equal answers, so filters check each key once.
    """
    return tuple(tuple(_rp_uuids_for_request(r, provider_mapping)) for r in requests)


def _socket_filter(
    pools: list[_Pool], numa_cells: Sequence[InstanceNUMACell], host: HostNUMATopology | None
) -> list[_Pool] | None:
    """Pools on a NUMA node sharing a socket with a guest cell; None: no socket info."""
    cells = host.cells if host is not None else ()
    if not cells or any(c.socket is None for c in cells):
        return None
    guest = {c.id for c in numa_cells}
    sockets = {c.socket for c in cells if c.id in guest}
    allowed = {c.id for c in cells if c.socket in sockets}
    return [p for p in pools if p.numa_node in allowed]


_Filtered = tuple[list[_Pool] | None, PciCheck]


def _filter_pools(
    pools: list[_Pool],
    request: InstancePCIRequest,
    numa_cells: Sequence[InstanceNUMACell] | None,
    rp_uuids: list[str],
    host: HostNUMATopology | None,
) -> _Filtered:
    """Pools that can serve ``request`` in preference order, or None and why not.

    The steps are nova's ``_filter_pools``: matching specs, NUMA affinity, device types
    nobody asked for, the providers Placement allocated from, live migratability."""
    want = request.count
    label = request.alias_name or request.request_id or "port"
    matched, why = _matching_pools(pools, request, label)
    if matched is None:
        return None, why
    before_numa = matched
    if numa_cells:
        matched, why = _numa_pools(matched, request, numa_cells, host, label)
        if matched is None:
            return None, why
    matched, why = _unrequested_types_out(matched, request, label)
    if matched is None:
        return None, why
    if rp_uuids:
        matched, why = _allocated_pools(matched, before_numa, rp_uuids, numa_cells, want, label)
        if matched is None:
            return None, why
    if all(s.get("live_migratable") == "true" for s in request.spec):
        matched = [p for p in matched if p.match.get("live_migratable") == "true"]
    elif all(s.get("live_migratable") == "false" for s in request.spec):
        matched = [p for p in matched if p.match.get("live_migratable") == "false"]

    if _count(matched) < want:
        return None, PciCheck(
            "pci:not-enough-devices",
            f"PCI request {label}: {want} device(s) needed, {_count(matched)} usable "
            "(after excluding unrequested PF/VDPA/remote-managed/live-migration mismatches)",
        )
    return matched, _OK


def _matching_pools(pools: list[_Pool], request: InstancePCIRequest, label: str) -> _Filtered:
    """Pools with free devices matching one of the request's specs, if enough of them."""
    want = request.count
    specs = [{k: v for k, v in s.items() if k not in _IGNORED_SPEC_KEYS} for s in request.spec]
    matched = [p for p in pools if p.count > 0 and any(_spec_matches(p, s) for s in specs)]
    have = _count(matched)
    if have < want:
        code = "pci:no-matching-device" if have == 0 else "pci:not-enough-devices"
        return None, PciCheck(
            code, f"PCI request {label}: {want} device(s) matching {list(specs)}, {have} free"
        )
    return matched, _OK


def _numa_pools(
    matched: list[_Pool],
    request: InstancePCIRequest,
    numa_cells: Sequence[InstanceNUMACell],
    host: HostNUMATopology | None,
    label: str,
) -> _Filtered:
    """The pools the request's NUMA affinity policy allows for these guest cells."""
    want = request.count
    policy = request.numa_policy or POLICY_LEGACY
    cell_ids = [c.id for c in numa_cells]
    local = [p for p in matched if p.numa_node in cell_ids]
    nodes = sorted({p.numa_node for p in matched}, key=lambda n: (n is None, n or 0))
    if policy == POLICY_REQUIRED or _count(local) >= want:
        chosen = local
    elif policy == POLICY_SOCKET:
        sock = _socket_filter(matched, numa_cells, host)
        if sock is None:
            return None, PciCheck(
                "pci:no-socket-info",
                f"PCI request {label}: socket affinity asked but the host does not report "
                "the socket of every NUMA cell",
            )
        if _count(sock) < want:
            return None, PciCheck(
                "pci:wrong-socket",
                f"PCI request {label}: {want} device(s) needed on the socket of guest "
                f"cells {cell_ids}, {_count(sock)} there (free devices on nodes {nodes})",
            )
        chosen = sock
    else:
        legacy = [p for p in matched if p.numa_node in cell_ids or p.numa_node is None]
        if policy == POLICY_LEGACY or _count(legacy) >= want:
            chosen = legacy
        else:  # preferred: anything, local devices first
            chosen = sorted(matched, key=lambda p: p.numa_node not in cell_ids)
    if _count(chosen) < want:
        return None, PciCheck(
            "pci:wrong-numa-node",
            f"PCI request {label} (numa policy {policy}): {want} device(s) needed on host "
            f"NUMA node(s) {cell_ids}, {_count(chosen)} there; matching devices are on "
            f"nodes {nodes}",
        )
    return chosen, _OK


def _unrequested_types_out(
    matched: list[_Pool], request: InstancePCIRequest, label: str
) -> _Filtered:
    """Without PFs, VDPA devices and remote-managed devices no spec asked for."""
    if all(s.get("dev_type") != DEV_TYPE_PF for s in request.spec):
        matched = [p for p in matched if p.match.get("dev_type") != DEV_TYPE_PF]
    if _count(matched) < request.count:
        return None, PciCheck(
            "pci:not-enough-devices",
            f"PCI request {label}: only PFs left, and PFs were not requested",
        )
    if all(s.get("dev_type") != DEV_TYPE_VDPA for s in request.spec):
        matched = [p for p in matched if p.match.get("dev_type") != DEV_TYPE_VDPA]
    if all(not _bool_str(s.get("remote_managed")) for s in request.spec):
        matched = [p for p in matched if not _bool_str(p.match.get("remote_managed"))]
    return matched, _OK


def _allocated_pools(
    matched: list[_Pool],
    before_numa: list[_Pool],
    rp_uuids: list[str],
    numa_cells: Sequence[InstanceNUMACell] | None,
    want: int,
    label: str,
) -> _Filtered:
    """The pools on the providers Placement allocated from, each holding its share."""
    per_rp = Counter(rp_uuids)
    matched = [
        p
        for p in matched
        if p.rp_uuid is not None and p.rp_uuid in per_rp and p.count >= per_rp[p.rp_uuid]
    ]
    # Stricter than nova, which lets a pool on one allocated provider stand in for
    # another allocated provider it cannot see (and then under-counts the consumption).
    if _count(matched) >= want and not set(per_rp) - {p.rp_uuid for p in matched}:
        return matched, _OK
    remote = sorted(
        {p.numa_node for p in before_numa if p.rp_uuid in per_rp and p not in matched},
        key=lambda n: (n is None, n or 0),
    )
    if numa_cells and remote:
        return None, PciCheck(
            "pci:wrong-numa-node",
            f"PCI request {label}: Placement allocated device(s) from providers "
            f"{sorted(per_rp)} on host NUMA node(s) {remote}, the guest is on "
            f"{[c.id for c in numa_cells]}",
        )
    return None, PciCheck(
        "pci:placement-mismatch",
        f"PCI request {label}: Placement allocated from providers {sorted(per_rp)}, "
        "but the host's pools on those providers cannot serve it",
    )


def _working_copy(pools: Sequence[PciDevicePool]) -> list[_Pool]:
    # nova keeps pools ordered by their number of keys (fewest first); sorted() is stable.
    work = [_Pool(i, p) for i, p in enumerate(pools)]
    work.sort(key=lambda w: len(w.source.tags))
    return work


def _apply(
    work: list[_Pool],
    requests: Sequence[InstancePCIRequest],
    provider_mapping: Mapping[str, Sequence[str]] | None,
    numa_cells: Sequence[InstanceNUMACell] | None,
    host: HostNUMATopology | None,
) -> PciCheck:
    for request in requests:
        if request.count <= 0:
            continue
        rp_uuids = _rp_uuids_for_request(request, provider_mapping)
        usable, why = _filter_pools(work, request, numa_cells, rp_uuids, host)
        if usable is None:
            return why
        if not rp_uuids:
            left = request.count
            for p in usable:
                take = min(p.count, left)
                p.count -= take
                left -= take
                if not left:
                    break
        else:
            rps = [p.rp_uuid for p in work if p.rp_uuid is not None]
            if len(rps) != len(set(rps)):
                return PciCheck(
                    "pci:placement-mismatch",
                    "several PCI pools share one resource provider; cannot follow the "
                    "Placement allocation",
                )
            per_rp = Counter(rp_uuids)
            for p in usable:
                assert p.rp_uuid is not None
                p.count -= per_rp.pop(p.rp_uuid, 0)
    return _OK


def pci_check_requests(
    pools: Sequence[PciDevicePool],
    requests: Sequence[InstancePCIRequest],
    *,
    provider_mapping: Mapping[str, Sequence[str]] | None = None,
    numa_cells: Sequence[InstanceNUMACell] | None = None,
    host_topology: HostNUMATopology | None = None,
) -> PciCheck:
    """Whether ``pools`` can satisfy every request, with a reason code and detail if not.

    ``numa_cells`` are fitted guest cells whose ids are host cell ids: with them each request's
    ``numa_policy`` is enforced. ``host_topology`` supplies the sockets for the socket policy.
    ``provider_mapping`` is one allocation candidate's ``mappings`` (PCI in Placement).
    """
    if not requests:
        return _OK
    if not pools:
        return PciCheck("pci:no-devices", "the host reports no PCI device pools")
    work = _working_copy(pools)
    return _apply(work, requests, provider_mapping, numa_cells, host_topology)


def pci_support_requests(
    pools: Sequence[PciDevicePool],
    requests: Sequence[InstancePCIRequest],
    *,
    provider_mapping: Mapping[str, Sequence[str]] | None = None,
    numa_cells: Sequence[InstanceNUMACell] | None = None,
    host_topology: HostNUMATopology | None = None,
) -> bool:
    """nova's ``PciDeviceStats.support_requests``: a dry run of ``pci_apply_requests``."""
    return pci_check_requests(
        pools,
        requests,
        provider_mapping=provider_mapping,
        numa_cells=numa_cells,
        host_topology=host_topology,
    ).ok


class PciRequestFailed(AsyncschedError, ValueError):
    """The pools cannot satisfy the requests (nova's PciDeviceRequestFailed)."""

    def __init__(self, check: PciCheck) -> None:
        super().__init__(check.detail or check.code or "PCI request failed")
        self.check = check


def pci_apply_requests(
    pools: Sequence[PciDevicePool],
    requests: Sequence[InstancePCIRequest],
    *,
    provider_mapping: Mapping[str, Sequence[str]] | None = None,
    numa_cells: Sequence[InstanceNUMACell] | None = None,
    host_topology: HostNUMATopology | None = None,
) -> tuple[PciDevicePool, ...]:
    """The pools after consuming ``requests`` (emptied pools dropped, order kept).

    Raises ``PciRequestFailed`` (a ValueError) if they cannot be satisfied; the input is never
    modified.
    """
    if not requests:
        return tuple(pools)
    if not pools:
        raise PciRequestFailed(PciCheck("pci:no-devices", "the host reports no PCI pools"))
    work = _working_copy(pools)
    check = _apply(work, requests, provider_mapping, numa_cells, host_topology)
    if not check.ok:
        raise PciRequestFailed(check)
    by_index = sorted(work, key=lambda w: w.index)
    return tuple(
        w.source if w.count == w.source.count else replace(w.source, count=w.count)
        for w in by_index
        if w.count > 0
    )
