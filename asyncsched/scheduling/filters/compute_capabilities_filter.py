"""ComputeCapabilitiesFilter: flavor extra specs against host attributes and stats."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling import extra_specs_ops
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState

_MISSING = object()


def _specs(spec: RequestSpec, state_fields: frozenset[str]) -> list[tuple[list[str], str, bool]]:
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


def _get_capability(state: HostState, scope: list[str]) -> Any:
    cap: Any = state
    for part in scope:
        if isinstance(cap, str):
            try:
                cap = json.loads(cap)
            except ValueError:
                return None
        if isinstance(cap, HostState):
            value = getattr(cap, part, None)
            cap = cap.stats.get(part) if value is None else value
        elif isinstance(cap, dict):
            cap = cap.get(part)
        else:
            value = getattr(cap, part, None)
            if value is None:
                stats = getattr(cap, "stats", None)
                cap = stats.get(part) if isinstance(stats, dict) else None
            else:
                cap = value
        if cap is None:
            return None
    return cap


_STATE_FIELDS = frozenset(HostState.__dataclass_fields__) | {"key"}


class ComputeCapabilitiesFilter(BaseHostFilter):
    """Every un-namespaced (known) or ``capabilities:`` extra spec must match the host."""

    name = "ComputeCapabilitiesFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(_specs(spec, _STATE_FIELDS))

    @staticmethod
    def _passes(state: HostState, checks: list[tuple[list[str], str, bool]]) -> str | None:
        for scope, req, bare in checks:
            if bare and scope[0] not in _STATE_FIELDS and scope[0] not in state.stats:
                continue
            cap = _get_capability(state, scope)
            if cap is None or not extra_specs_ops.match(str(cap), req):
                return "capabilities"
        return None

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return self._passes(state, _specs(spec, _STATE_FIELDS))

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        checks = _specs(spec, _STATE_FIELDS)
        return [self._passes(s, checks) for s in states]
