"""SimpleCIDRAffinityFilter: hint ``build_near_host_ip`` (+ ``cidr``, default /24)."""

from __future__ import annotations

import ipaddress

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


class SimpleCIDRAffinityFilter(BaseHostFilter):
    name = "SimpleCIDRAffinityFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(spec.get_scheduler_hint("build_near_host_ip"))

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        near = spec.get_scheduler_hint("build_near_host_ip")
        if not near:
            return None
        cidr = spec.get_scheduler_hint("cidr", "/24")
        try:
            net = ipaddress.ip_network(f"{near}{cidr}", strict=False)
            ok = state.host_ip is not None and ipaddress.ip_address(state.host_ip) in net
        except ValueError:
            ok = False
        return None if ok else "cidr"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
