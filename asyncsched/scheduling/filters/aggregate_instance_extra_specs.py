"""AggregateInstanceExtraSpecsFilter: flavor extra specs against aggregate metadata."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling import extra_specs_ops
from asyncsched.scheduling.aggregate_utils import aggregate_metadata_get_by_host
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState

_SCOPE = "aggregate_instance_extra_specs"


class AggregateInstanceExtraSpecsFilter(BaseHostFilter):
    name = "AggregateInstanceExtraSpecsFilter"
    run_filter_once_per_request = True

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(spec.flavor.extra_specs)

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        especs = spec.flavor.extra_specs
        if not especs:
            return None
        metadata = aggregate_metadata_get_by_host(state)
        for key, req in especs.items():
            scope = key.split(":", 1)
            if len(scope) > 1:
                if scope[0] != _SCOPE:
                    continue
                key = scope[1]
            vals = metadata.get(key)
            if not vals:
                return "aggregate-extra-specs"
            if not any(extra_specs_ops.match(v, req) for v in vals):
                return "aggregate-extra-specs"
        return None

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
