"""IsolatedHostsFilter: isolated images only on isolated hosts (and optionally vice versa)."""

from __future__ import annotations

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


class IsolatedHostsFilter(BaseHostFilter):
    name = "IsolatedHostsFilter"
    run_filter_once_per_request = True
    RUN_ON_REBUILD = True

    def is_active(self, spec: RequestSpec) -> bool:
        fs = self.config.filter_scheduler
        return bool(fs.isolated_images) or (
            fs.restrict_isolated_hosts_to_isolated_images and bool(fs.isolated_hosts)
        )

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        fs = self.config.filter_scheduler
        restrict = fs.restrict_isolated_hosts_to_isolated_images
        host_isolated = state.host in fs.isolated_hosts
        if not fs.isolated_images:
            ok = (not restrict) or not host_isolated
        else:
            image_ref = spec.image.id if spec.image is not None else None
            image_isolated = image_ref in fs.isolated_images
            ok = (
                image_isolated == host_isolated
                if restrict
                else (not image_isolated) or host_isolated
            )
        return None if ok else "isolated"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
