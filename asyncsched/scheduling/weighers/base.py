"""The weigher plugin contract: one weigher class per module, nova's class names.

Raw scores are clamped to ``[minval, maxval]`` where set, normalised per request with nova's
min/max rule, then multiplied by ``multiplier(host)`` (config value, or the minimum of the
host's aggregate metadata values for ``aggregate_key``) and summed over weighers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import weight_multiplier
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.state.host_state import HostState


class BaseHostWeigher:
    name: ClassVar[str] = ""
    minval: ClassVar[float | None] = None
    maxval: ClassVar[float | None] = None
    #: Aggregate metadata key overriding the multiplier (nova: the option name).
    aggregate_key: ClassVar[str | None] = None

    def __init__(self, config: Config) -> None:
        self.config = config

    def config_multiplier(self) -> float:
        """The multiplier from configuration (before aggregate overrides)."""
        return 1.0

    def is_active(self, spec: RequestSpec) -> bool:
        """False when every host would score the same (so the weigher can be skipped)."""
        return self.config_multiplier() != 0.0 or self.aggregate_key is not None

    def weigh(self, host: HostCandidate, spec: RequestSpec) -> float:
        """The raw score of one host."""
        raise NotImplementedError

    # -- optional fast path (additions) ----------------------------------------------------

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        """Raw scores of many hosts at once; override with a tight loop over bare HostStates."""
        return [self.weigh(HostCandidate(s), spec) for s in states]

    def multiplier(self, host: HostState) -> float:
        """The per-host multiplier: the minimum aggregate override, else the config value."""
        if self.aggregate_key is None:
            return self.config_multiplier()
        return weight_multiplier(host, self.aggregate_key, self.config_multiplier())
