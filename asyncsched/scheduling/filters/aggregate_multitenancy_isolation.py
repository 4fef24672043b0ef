"""AggregateMultiTenancyIsolation: ``filter_tenant_id*`` aggregates take only those projects."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import aggregate_metadata_get_by_host
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


class AggregateMultiTenancyIsolation(BaseHostFilter):
    name = "AggregateMultiTenancyIsolation"
    run_filter_once_per_request = True

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        if not state.aggregates:
            return None
        tenants: set[str] = set()
        for key, values in aggregate_metadata_get_by_host(state).items():
            if key.startswith("filter_tenant_id"):
                tenants.update(values)
        if tenants and spec.project_id not in tenants:
            return "tenant"
        return None

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
