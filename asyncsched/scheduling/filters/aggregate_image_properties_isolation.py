"""AggregateImagePropertiesIsolation: image properties must match the aggregates' metadata."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import aggregate_metadata_get_by_host
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


class AggregateImagePropertiesIsolation(BaseHostFilter):
    name = "AggregateImagePropertiesIsolation"
    run_filter_once_per_request = True
    RUN_ON_REBUILD = True

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        fs = self.config.filter_scheduler
        namespace = fs.aggregate_image_properties_isolation_namespace
        prefix = f"{namespace}{fs.aggregate_image_properties_isolation_separator}"
        props = spec.image_props
        for key, options in aggregate_metadata_get_by_host(state).items():
            if namespace and not key.startswith(prefix):
                continue
            prop = props.get(key)
            if prop and str(prop) not in options:
                return "image-isolation"
        return None

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
