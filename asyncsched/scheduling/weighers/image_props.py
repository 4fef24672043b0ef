"""ImagePropertiesWeigher: prefer hosts whose instances use images with the same properties.

nova loads the instances' image metadata from the cell database per host. asyncsched reads it
from ``HostState.extra["instance_image_props"]`` ({instance uuid: {prop: value}}) when the
host-state cache provides it; hosts without it score 0. Off by default (multiplier 0.0).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.filters.metrics_filter import parse_setting
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState


class ImagePropertiesWeigher(BaseHostWeigher):
    name = "ImagePropertiesWeigher"
    aggregate_key = "image_props_weight_multiplier"

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.image_props_weight_multiplier)

    def is_active(self, spec: RequestSpec) -> bool:
        return self.config_multiplier() != 0.0

    def _score(
        self, s: HostState, wanted: frozenset[tuple[str, str]], ratios: dict[str, float]
    ) -> float:
        """nova: count (property, value) pairs shared with the host's instances' images."""
        images: Mapping[str, Mapping[str, Any]] = s.extra.get("instance_image_props", {})
        existing: list[tuple[str, str]] = []
        for uuid in s.instances:
            props = images.get(uuid)
            if props:
                existing.extend((k, str(v)) for k, v in props.items())
        if not existing:
            return 0.0
        weight = 0.0
        for prop, value in wanted.intersection(existing):
            count = existing.count((prop, value))
            weight += ratios.get(prop, 0.0) * count if ratios else count
        return weight

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        if self.config_multiplier() == 0.0:
            return [0.0] * len(states)
        wanted = frozenset((k, f"{v}") for k, v in spec.image_props.items())
        ratios = dict(parse_setting(self.config.filter_scheduler.image_props_weight_setting))
        return [self._score(s, wanted, ratios) for s in states]

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return self.weigh_states([host.state], spec)[0]
