"""DiskWeigher: free disk."""

from __future__ import annotations

from asyncsched.scheduling.columns import attribute
from asyncsched.scheduling.weighers.base import BaseHostWeigher


class DiskWeigher(BaseHostWeigher):
    name = "DiskWeigher"
    minval = 0
    aggregate_key = "disk_weight_multiplier"
    column = attribute("free_disk_mb")

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.disk_weight_multiplier)
