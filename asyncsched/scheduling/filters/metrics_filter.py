"""MetricsFilter: the host reports every metric named in ``[metrics] weight_setting``."""

from __future__ import annotations

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.scheduling.metrics_setting import parse_setting
from asyncsched.state.host_state import HostState


class MetricsFilter(BaseHostFilter):
    name = "MetricsFilter"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.keys = frozenset(n for n, _ in parse_setting(self.config.metrics.weight_setting))

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(self.keys)

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return None if self.keys.issubset(state.metrics) else "metrics"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
