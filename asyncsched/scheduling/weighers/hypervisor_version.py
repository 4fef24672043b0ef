"""HypervisorVersionWeigher: newer hypervisors win by default."""

from __future__ import annotations

from asyncsched.scheduling.columns import Column
from asyncsched.scheduling.weighers.base import BaseHostWeigher

HYPERVISOR_VERSION = Column("hypervisor_version", lambda s: s.hypervisor_version or 0)


class HypervisorVersionWeigher(BaseHostWeigher):
    name = "HypervisorVersionWeigher"
    minval = None
    aggregate_key = "hypervisor_version_weight_multiplier"
    column = HYPERVISOR_VERSION

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.hypervisor_version_weight_multiplier)
