"""ComputeFilter: the host's nova-compute service is enabled and up."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState, ServiceInfo


def _utcnow() -> datetime:
    return datetime.now(UTC)


class ComputeFilter(BaseHostFilter):
    """Passes hosts whose service is not disabled and heartbeated within service_down_time."""

    name = "ComputeFilter"
    run_filter_once_per_request = True

    def __init__(self, config: Config, clock: Callable[[], datetime] = _utcnow) -> None:
        super().__init__(config)
        self.clock = clock

    def _window(self) -> tuple[datetime, datetime, datetime, datetime]:
        """Heartbeat bounds (aware, naive-UTC) so each host costs two comparisons."""
        now = self.clock()
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        down = timedelta(seconds=self.config.default.service_down_time)
        lo, hi = now - down, now + down
        return lo, hi, lo.replace(tzinfo=None), hi.replace(tzinfo=None)

    @staticmethod
    def _check(
        svc: ServiceInfo | None, win: tuple[datetime, datetime, datetime, datetime]
    ) -> str | None:
        if svc is None:
            return "no-service"
        if svc.disabled:
            return "disabled"
        if svc.forced_down:
            return "down"
        beat = svc.last_seen_up or svc.created_at
        if beat is None:
            return "down"
        if beat.tzinfo is None:
            return None if win[2] <= beat <= win[3] else "down"
        return None if win[0] <= beat <= win[1] else "down"

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return self._check(state.service, self._window())

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        win = self._window()
        check = self._check
        return [check(s.service, win) for s in states]
