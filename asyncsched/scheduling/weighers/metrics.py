"""MetricsWeigher: a weighted sum of host metrics from ``[metrics] weight_setting``."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.conf.options import Config
from asyncsched.exceptions import NovaException
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.metrics_setting import parse_setting
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class ComputeHostMetricNotFound(NovaException):
    msg_fmt = "Metric %(name)s could not be found on the compute host node %(host)s.%(node)s."


class MetricsWeigher(BaseHostWeigher):
    name = "MetricsWeigher"
    aggregate_key = "metrics_weight_multiplier"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.setting = parse_setting(config.metrics.weight_setting)

    def config_multiplier(self) -> float:
        return float(self.config.metrics.weight_multiplier)

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(self.setting) and super().is_active(spec)

    def _score(self, s: HostState) -> float:
        value = 0.0
        metrics = s.metrics
        for name, ratio in self.setting:
            if name in metrics:
                value += metrics[name] * ratio
            elif self.config.metrics.required:
                raise ComputeHostMetricNotFound(host=s.host, node=s.nodename, name=name)
            elif ratio * self.multiplier(s) != 0:
                return float(self.config.metrics.weight_of_unavailable)
        return value

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return self._score(host.state)

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        if not self.setting:
            return [0.0] * len(states)
        return [self._score(s) for s in states]
