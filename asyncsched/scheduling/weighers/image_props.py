"""ImagePropertiesWeigher: prefer hosts whose instances use images with the same properties.

nova's semantics: the score of a host is, over the (property, value) pairs of the requested
image that also occur among the host's instances' images, the number of those instances'
images carrying each pair (times ``image_props_weight_setting``'s ratio for that property when
the setting is given; a property it does not name then counts 0). Values compare as ``str()``
of nova's typed ImageMetaProps values; an instance whose image metadata is unknown counts
nothing. Off by default: with ``image_props_weight_multiplier = 0.0`` every host scores 0, even
where an aggregate overrides the multiplier (nova short-circuits on the config value).

nova reads each instance's system metadata from the cell database per host per request.
asyncsched's host-state cache keeps it instead (only while the weigher can matter):
``HostState.extra["instance_image_props"]`` ({instance uuid: {prop: value string}}) and, for
speed, ``extra["instance_image_prop_counts"]`` ({(prop, value): instances}) over the same
instances.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from asyncsched.conf.options import Config
from asyncsched.objects.image_props import canonical_image_props
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.state.host_state import HostState
from asyncsched.state.rows import (
    IMAGE_PROP_COUNTS_KEY,
    IMAGE_PROPS_KEY,
    image_prop_counts,
)

LOG = logging.getLogger(__name__)


def parse_ratios(setting: Sequence[str]) -> dict[str, float]:
    """nova's ``parse_options(..., sep='=', converter=float)``: the key is taken as written
    (not stripped); entries without ``=``, with an empty key or a non-float ratio are
    ignored with one warning."""
    good: dict[str, float] = {}
    bad: list[str] = []
    for item in setting:
        key, sep, raw = item.partition("=")
        try:
            ratio = float(raw)
        except ValueError:
            bad.append(item)
            continue
        if key and sep:
            good[key] = ratio
        else:
            bad.append(item)
    if bad:
        LOG.warning(
            "Ignoring the invalid elements of the option "
            "filter_scheduler.image_props_weight_setting: %s",
            ", ".join(bad),
        )
    return good


class ImagePropertiesWeigher(BaseHostWeigher):
    name = "ImagePropertiesWeigher"
    aggregate_key = "image_props_weight_multiplier"

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.setting = parse_ratios(config.filter_scheduler.image_props_weight_setting)

    def config_multiplier(self) -> float:
        return float(self.config.filter_scheduler.image_props_weight_multiplier)

    def is_active(self, spec: RequestSpec) -> bool:
        return self.config_multiplier() != 0.0

    def requested(self, spec: RequestSpec) -> dict[str, str]:
        """The request's image properties as nova's weigher stringifies them."""
        return canonical_image_props(dict(spec.image_props.items()), keep_unknown=True)

    def _score(self, s: HostState, wanted: Sequence[tuple[str, str]]) -> float:
        counts: Mapping[tuple[str, str], int] | None = s.extra.get(IMAGE_PROP_COUNTS_KEY)
        if counts is None:  # a HostState the cache did not fill: count from the raw map
            counts = image_prop_counts(s.instances, s.extra.get(IMAGE_PROPS_KEY, {}))
        if not counts:
            return 0.0
        weight = 0.0
        setting = self.setting
        for pair in wanted:
            n = counts.get(pair)
            if n:
                weight += setting.get(pair[0], 0.0) * n if setting else n
        return weight

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        if self.config_multiplier() == 0.0:
            return [0.0] * len(states)
        wanted = list(self.requested(spec).items())
        if not wanted:
            return [0.0] * len(states)
        return [self._score(s, wanted) for s in states]

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        return self.weigh_states([host.state], spec)[0]
