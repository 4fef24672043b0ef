"""AggregateTypeAffinityFilter: aggregates with ``instance_type`` accept only those flavors."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import aggregate_values_from_key
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


class AggregateTypeAffinityFilter(BaseHostFilter):
    name = "AggregateTypeAffinityFilter"
    run_filter_once_per_request = True

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        vals = aggregate_values_from_key(state, "instance_type")
        if not vals:
            return None
        for val in vals:
            if spec.flavor.name in [x.strip() for x in val.split(",")]:
                return None
        return "instance-type"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
