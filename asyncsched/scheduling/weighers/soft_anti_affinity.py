"""ServerGroupSoftAntiAffinityWeigher: minus the soft-anti-affinity members on the host."""

from __future__ import annotations

from asyncsched.scheduling.weighers.soft_affinity import ServerGroupSoftAffinityWeigher


class ServerGroupSoftAntiAffinityWeigher(ServerGroupSoftAffinityWeigher):
    name = "ServerGroupSoftAntiAffinityWeigher"
    aggregate_key = "soft_anti_affinity_weight_multiplier"
    policy = "soft-anti-affinity"
    sign = -1.0

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.soft_anti_affinity_weight_multiplier)
