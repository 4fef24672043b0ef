"""IoOpsWeigher: concurrent I/O-heavy tasks (default multiplier -1 prefers idle hosts)."""

from __future__ import annotations

from asyncsched.scheduling.columns import attribute
from asyncsched.scheduling.weighers.base import BaseHostWeigher


class IoOpsWeigher(BaseHostWeigher):
    name = "IoOpsWeigher"
    minval = 0
    aggregate_key = "io_ops_weight_multiplier"
    column = attribute("num_io_ops")

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.io_ops_weight_multiplier)
