"""ComputeFilter: the host's nova-compute service is enabled and up."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import numpy as np

from asyncsched.common.clock import as_utc, utcnow
from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import BoolArray, Column, ColumnMask, ColumnView
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate, inherits
from asyncsched.scheduling.servicegroup import heartbeat_ts, service_is_up
from asyncsched.state.host_state import HostState, ServiceInfo

# service_state column values (the per-host checks in _check's order)
_MAYBE_UP, _NO_SERVICE, _DISABLED, _FORCED_DOWN = 0.0, 1.0, 2.0, 3.0


def _service_state(s: HostState) -> float:
    svc = s.service
    if svc is None:
        return _NO_SERVICE
    if svc.disabled:
        return _DISABLED
    return _FORCED_DOWN if svc.forced_down else _MAYBE_UP


SERVICE_STATE = Column("service_state", _service_state)
HEARTBEAT = Column("heartbeat", lambda s: heartbeat_ts(s.service))


class ComputeFilter(BaseHostFilter):
    """Passes hosts whose service is not disabled and heartbeated within service_down_time."""

    name = "ComputeFilter"
    run_filter_once_per_request = True

    def __init__(self, config: Config, clock: Callable[[], datetime] = utcnow) -> None:
        super().__init__(config)
        self.clock = clock

    def _down_time(self) -> timedelta:
        return timedelta(seconds=self.config.default.service_down_time)

    @staticmethod
    def _check(svc: ServiceInfo | None, now: datetime, down_time: timedelta) -> str | None:
        if svc is None:
            return "no-service"
        if svc.disabled:
            return "disabled"
        return None if service_is_up(svc, now, down_time) else "down"

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        return self._check(state.service, as_utc(self.clock()), self._down_time())

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        now, down, check = as_utc(self.clock()), self._down_time(), self._check
        return [check(s.service, now, down) for s in states]

    def column_mask(self) -> ColumnMask | None:
        if not inherits(self, ComputeFilter, "_check"):
            return None
        return ColumnMask((SERVICE_STATE, HEARTBEAT), self._mask)

    def _mask(self, view: ColumnView, now: datetime) -> tuple[BoolArray, Counter[str]]:
        """The per-host rule over columns; ``now`` is the engine's clock."""
        state, beat = view[SERVICE_STATE], view[HEARTBEAT]
        win = float(self.config.default.service_down_time)
        stamp = as_utc(now).timestamp()
        with np.errstate(invalid="ignore"):
            alive = np.abs(stamp - beat) <= win  # NaN (no beat) is False
        maybe_up = state == _MAYBE_UP
        _recheck(view, maybe_up & ~alive, alive, stamp, win)
        ok = maybe_up & alive
        reasons: Counter[str] = Counter()
        if not ok.all():
            down = (state == _FORCED_DOWN) | (maybe_up & ~alive)
            for code, mask in (
                ("no-service", state == _NO_SERVICE),
                ("disabled", state == _DISABLED),
                ("down", down),
            ):
                c = int(mask.sum())
                if c:
                    reasons[code] = c
        return ok, reasons


def _recheck(
    view: ColumnView, suspects: BoolArray, alive: BoolArray, now: float, win: float
) -> None:
    """A heartbeat swaps a host's service without a touch (``state/beats.py``), so a row's
    heartbeat is a lower bound of the host's: "up" from the row is right, "down" is read
    again from the host's service, exactly (``alive`` is updated in place)."""
    at = np.flatnonzero(suspects)
    if not len(at):
        return
    states = view.columns.states
    rows = view.slots[at].tolist()
    beats = np.fromiter((heartbeat_ts(states[r].service) for r in rows), np.float64, len(rows))
    with np.errstate(invalid="ignore"):
        alive[at] = np.abs(now - beats) <= win
