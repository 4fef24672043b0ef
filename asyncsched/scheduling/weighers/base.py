"""The weigher plugin contract: one weigher class per module, nova's class names.

Raw scores are clamped to ``[minval, maxval]`` where set, normalised per request with nova's
min/max rule, then multiplied by ``multiplier(host)`` (config value, or the minimum of the
host's aggregate metadata values for ``aggregate_key``) and summed over weighers.

A weigher whose raw score is a function of the shared HostState declares it as ``column``:
``weigh`` then reads it and the engine takes every host's score from the numpy column.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.aggregate_utils import weight_multiplier
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.columns import Column
from asyncsched.state.host_state import HostState


class BaseHostWeigher:
    name: ClassVar[str] = ""
    minval: ClassVar[float | None] = None
    maxval: ClassVar[float | None] = None
    #: Aggregate metadata key overriding the multiplier (nova: the option name).
    aggregate_key: ClassVar[str | None] = None
    #: The aggregate override is multiplied by this (nova negates BuildFailureWeigher's).
    aggregate_sign: ClassVar[float] = 1.0
    #: The raw score as a host column; a subclass overriding ``weigh``/``weigh_states``
    #: without declaring its own column loses the inherited one.
    column: ClassVar[Column | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "column" not in own and ("weigh" in own or "weigh_states" in own):
            cls.column = None

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
        if self.column is None:
            raise NotImplementedError
        return float(self.column.read(host.state))

    # -- optional fast path (additions) ----------------------------------------------------

    def weigh_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[float]:
        """Raw scores of many hosts at once; override with a tight loop over bare HostStates."""
        if self.column is not None:
            read = self.column.read
            return [float(read(s)) for s in states]
        return [self.weigh(HostCandidate(s), spec) for s in states]

    def multiplier(self, host: HostState) -> float:
        """The per-host multiplier: the minimum aggregate override, else the config value."""
        if self.aggregate_key is None:
            return self.config_multiplier()
        sign = self.aggregate_sign
        return sign * weight_multiplier(host, self.aggregate_key, sign * self.config_multiplier())
