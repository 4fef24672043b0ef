"""CrossCellWeigher: on a cross-cell move, prefer hosts in the source (preferred) cell."""

from __future__ import annotations

from collections.abc import Sequence

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


def _preferred_cell(spec: RequestSpec) -> str | None:
    dest = spec.requested_destination
    if dest is None or dest.cell is None or not dest.allow_cross_cell_move:
        return None
    return dest.cell.uuid


class CrossCellWeigher(BaseHostWeigher):
    name = "CrossCellWeigher"
    aggregate_key = "cross_cell_move_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.cross_cell_move_weight_multiplier)

    def is_active(self, spec: RequestSpec) -> bool:
        return _preferred_cell(spec) is not None and super().is_active(spec)

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return self.weigh_states([host.state], spec)[0]

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        cell = _preferred_cell(spec)
        if cell is None:
            return [0.0] * len(states)
        return [1.0 if s.cell_uuid == cell else -1.0 for s in states]
