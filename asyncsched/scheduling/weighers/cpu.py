"""CPUWeigher: free vCPUs after the allocation ratio."""

from __future__ import annotations

from asyncsched.scheduling.columns import Column
from asyncsched.scheduling.weighers.base import BaseHostWeigher

CPU_FREE = Column("cpu_free", lambda s: s.vcpus_total * s.cpu_allocation_ratio - s.vcpus_used)


class CPUWeigher(BaseHostWeigher):
    name = "CPUWeigher"
    minval = 0
    aggregate_key = "cpu_weight_multiplier"
    column = CPU_FREE

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.cpu_weight_multiplier)
