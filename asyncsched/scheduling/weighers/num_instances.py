"""NumInstancesWeigher: instance count (off by default)."""

from __future__ import annotations

from asyncsched.scheduling.columns import attribute
from asyncsched.scheduling.weighers.base import BaseHostWeigher


class NumInstancesWeigher(BaseHostWeigher):
    name = "NumInstancesWeigher"
    minval = None
    aggregate_key = "num_instances_weight_multiplier"
    column = attribute("num_instances")

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.num_instances_weight_multiplier)
