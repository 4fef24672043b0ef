"""RAMWeigher: free RAM (positive multiplier spreads, negative stacks)."""

from __future__ import annotations

from asyncsched.scheduling.columns import attribute
from asyncsched.scheduling.weighers.base import BaseHostWeigher


class RAMWeigher(BaseHostWeigher):
    name = "RAMWeigher"
    minval = 0
    aggregate_key = "ram_weight_multiplier"
    column = attribute("free_ram_mb")

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.ram_weight_multiplier)
