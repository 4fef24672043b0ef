"""MetricsFilter: the host reports every metric named in ``[metrics] weight_setting``."""

from __future__ import annotations

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


def parse_setting(setting: tuple[str, ...]) -> list[tuple[str, float]]:
    """``name=ratio`` entries; malformed ones are skipped, as nova does (with a warning)."""
    out: list[tuple[str, float]] = []
    for item in setting:
        name, sep, ratio = item.partition("=")
        if not sep or not name:
            continue
        try:
            out.append((name, float(ratio)))  # as written, spaces too (nova's parse_options)
        except ValueError:
            continue
    return out


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
