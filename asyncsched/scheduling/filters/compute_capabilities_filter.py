"""ComputeCapabilitiesFilter: flavor extra specs against host attributes and stats."""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from operator import attrgetter
from typing import Any

from asyncsched.common.clock import as_utc
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling import extra_specs_ops
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


def _specs(spec: RequestSpec) -> list[tuple[list[str], str, bool]]:
    """(scope path, requirement, bare key) for each extra spec this filter checks."""
    especs = dict(spec.flavor.extra_specs)
    bits = especs.pop("hw:maxphysaddr_bits", None)
    if bits is not None:
        especs["capabilities:cpu_info:maxphysaddr:bits"] = ">= " + bits
    out: list[tuple[list[str], str, bool]] = []
    for key, req in especs.items():
        scope = key.split(":")
        if len(scope) == 1:
            out.append((scope, req, True))
        elif scope[0] == "capabilities":
            out.append((scope[1:], req, False))
    return out


#: The attributes of nova's HostState (``hasattr`` is what nova checks for a bare key).
NOVA_ATTRIBUTES = frozenset(
    (
        "_lock_name aggregates allocation_candidates cell_uuid cpu_allocation_ratio cpu_info "
        "disk_allocation_ratio disk_mb_used failed_builds free_disk_mb free_ram_mb host "
        "host_ip hypervisor_hostname hypervisor_type hypervisor_version instances limits "
        "metrics nodename num_instances num_io_ops numa_topology pci_stats "
        "ram_allocation_ratio service stats supported_instances total_usable_disk_gb "
        "total_usable_ram_mb updated uuid vcpus_total vcpus_used update consume_from_request "
        "_update_from_compute_node _locked_consume_from_request"
    ).split()
)
#: Attributes whose value is the same in our HostState and compares the same as a string.
_SAME = frozenset(
    "cell_uuid cpu_allocation_ratio cpu_info disk_allocation_ratio disk_mb_used failed_builds "
    "free_disk_mb free_ram_mb host host_ip hypervisor_hostname hypervisor_type "
    "hypervisor_version nodename num_instances num_io_ops ram_allocation_ratio stats "
    "total_usable_disk_gb total_usable_ram_mb uuid vcpus_total vcpus_used".split()
)


class _Opaque:
    """A nova object no requirement can sensibly match (its str() is a repr)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"<nova {self.name} object>"


def _attribute(state: HostState, name: str) -> Any:
    """What ``getattr(nova_host_state, name, None)`` would give, as far as a match can tell."""
    if name not in NOVA_ATTRIBUTES:
        return None
    if name in _SAME:
        return getattr(state, name)
    if name == "supported_instances":
        return [list(t) for t in state.supported_instances]
    if name == "limits":
        return {}  # the Selection limits are filled by NUMATopologyFilter, which runs later
    if name == "numa_topology" and state.numa_topology is None:
        return None
    if name == "updated":  # nova: an aware UTC datetime, matched as its str()
        return None if state.updated is None else as_utc(state.updated)
    return _Opaque(name)


def _get_capability(state: HostState, scope: list[str]) -> Any:
    """nova's ``_get_capabilities``: attributes, else stats, then JSON strings and dicts."""
    cap: Any = state
    for part in scope:
        if isinstance(cap, str):
            try:
                cap = json.loads(cap)
            except ValueError:
                return None
        if isinstance(cap, HostState):
            value = _attribute(cap, part)
            cap = cap.stats.get(part) if value is None else value
        elif isinstance(cap, dict):
            cap = cap.get(part)
        else:
            value = getattr(cap, part, None)
            if value is None:
                stats = getattr(cap, "stats", None)
                if not isinstance(stats, dict):
                    return None  # nova: AttributeError, logged, the host fails
                cap = stats.get(part)
            else:
                cap = value
        if cap is None:
            return None
    return cap


class ComputeCapabilitiesFilter(BaseHostFilter):
    """Every un-namespaced (known) or ``capabilities:`` extra spec must match the host."""

    name = "ComputeCapabilitiesFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(_specs(spec))

    def verdict_key(self, spec: RequestSpec) -> Hashable:
        return tuple((tuple(scope), req, bare) for scope, req, bare in _specs(spec))

    @staticmethod
    def _passes(state: HostState, checks: list[tuple[list[str], str, bool]]) -> str | None:
        for scope, req, bare in checks:
            if bare and scope[0] not in NOVA_ATTRIBUTES and scope[0] not in state.stats:
                continue
            cap = _get_capability(state, scope)
            if cap is None or not extra_specs_ops.match(str(cap), req):
                return "capabilities"
        return None

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return self._passes(state, _specs(spec))

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        """Hosts whose checked attributes are plain values (most extra specs name one such
        attribute or stat) share one verdict per distinct value tuple; the rest walk."""
        checks = _specs(spec)
        if not checks:
            return [None] * len(states)
        plain = all(len(scope) == 1 and scope[0] in _SAME for scope, _, _ in checks)
        if not plain:
            return [self._passes(s, checks) for s in states]
        getters = [attrgetter(scope[0]) for scope, _, _ in checks]
        names = [scope[0] for scope, _, _ in checks]
        memo: dict[tuple[Any, ...], str | None] = {}
        out: list[str | None] = []
        for s in states:
            # _get_capability's first step: the attribute, else the stat of that name
            key = (getters[0](s),) if len(getters) == 1 else tuple([g(s) for g in getters])
            if None in key:
                key = tuple(
                    v if v is not None else s.stats.get(n) for v, n in zip(key, names, strict=True)
                )
            try:
                out.append(memo[key])
            except KeyError:
                out.append(memo.setdefault(key, self._passes(s, checks)))
            except TypeError:  # an unhashable value (a stats dict): no sharing for it
                out.append(self._passes(s, checks))
        return out
