"""BuildFailureWeigher: recent failed builds push a host down (multiplier negated)."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import weight_multiplier
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class BuildFailureWeigher(BaseHostWeigher):
    name = "BuildFailureWeigher"
    aggregate_key = "build_failure_weight_multiplier"

    def config_multiplier(self) -> float:
        return -1.0 * float(self.config.filter_scheduler.build_failure_weight_multiplier)

    def multiplier(self, host: HostState) -> float:
        conf = float(self.config.filter_scheduler.build_failure_weight_multiplier)
        return -1.0 * weight_multiplier(host, "build_failure_weight_multiplier", conf)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return float(host.state.failed_builds)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        return [float(s.failed_builds) for s in states]
