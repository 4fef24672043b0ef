"""BuildFailureWeigher: recent failed builds push a host down (multiplier negated)."""

from __future__ import annotations

from asyncsched.scheduling.columns import attribute
from asyncsched.scheduling.weighers.base import BaseHostWeigher


class BuildFailureWeigher(BaseHostWeigher):
    name = "BuildFailureWeigher"
    aggregate_key = "build_failure_weight_multiplier"
    aggregate_sign = -1.0  # nova negates the aggregate override too
    column = attribute("failed_builds")

    def config_multiplier(self) -> float:
        return -1.0 * float(self.config.filter_scheduler.build_failure_weight_multiplier)
