"""The filter plugin contract: one filter class per module, nova's class names.

A filter is instantiated once (at start and on SIGHUP) with the configuration. Per request the
scheduler first asks ``is_active(spec)``: an inactive filter passes every host without being
called per host, which is how most filters cost nothing on most requests. ``host_passes``
returns ``None`` when the host passes, or a short reason code ("ram", "disabled", ...) that
the scheduler counts for diagnosis. This per-host method is the semantic reference and what
third-party filters implement; a filter may also offer faster forms of the same rule
(``state_passes``/``filter_states`` over bare HostStates, ``column_mask`` over numpy columns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from asyncsched.conf.options import Config
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.candidate import HostCandidate
from asyncsched.scheduling.columns import ColumnMask
from asyncsched.state.host_state import HostState

__all__ = ["BaseHostFilter", "HostCandidate", "JudgedHostFilter", "Verdict", "inherits"]


_RULE = ("host_passes", "state_passes", "filter_states")


def inherits(obj: object, owner: type, *names: str) -> bool:
    """True when ``type(obj)`` takes the per-host methods and ``names`` from ``owner`` unchanged.

    A filter offering a vectorised form checks this so a subclass that changes the rule (say
    AggregateIoOpsFilter's per-aggregate limit) falls back to the per-host methods.
    """
    cls = type(obj)
    return all(getattr(cls, n) is getattr(owner, n) for n in (*_RULE, *names))


class BaseHostFilter:
    """Base of every host filter."""

    #: nova's class name, as operators write it in ``enabled_filters``.
    name: ClassVar[str] = ""
    #: Run only for the first instance of a multi-create (the host list is cumulative).
    run_filter_once_per_request: ClassVar[bool] = False
    #: On a rebuild only filters with this flag filter; the others pass every host.
    RUN_ON_REBUILD: ClassVar[bool] = False

    def __init__(self, config: Config) -> None:
        self.config = config

    def check_config(self) -> None:
        """Raise ``ConfigError`` if this filter cannot run with the configuration."""

    def is_active(self, spec: RequestSpec) -> bool:
        """False when the filter would pass every host for this request."""
        return True

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        """``None`` if the host passes, else a short reason code."""
        raise NotImplementedError

    # -- optional fast path (additions; the per-host method above stays the reference) ------

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        """Like ``host_passes`` for filters that read only the shared HostState.

        A filter that overrides this declares it never looks at request-local candidates or
        limits, so the scheduler core may call it (or ``filter_states``) on bare HostStates
        without building a HostCandidate per host.
        """
        raise NotImplementedError

    @classmethod
    def is_state_only(cls) -> bool:
        """True when the class overrides ``state_passes`` (the core may skip HostCandidate)."""
        return cls.state_passes is not BaseHostFilter.state_passes

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        """A reason code (or None) per host; override to hoist per-request work out of the loop."""
        passes = self.state_passes
        return [passes(s, spec) for s in states]

    def verdict_key(self, spec: RequestSpec) -> Hashable | None:
        """For a state-only filter whose verdict is a pure function of the host's attributes
        and this key (nothing else of the request, no clock): the engine then keeps each
        host's verdict while the host does not change. None (the default): run every time."""
        return None

    def column_mask(self) -> ColumnMask | None:
        """This filter's rule over numpy host columns, or None (the default).

        Asked once per configuration. A filter returning a mask declares it gives exactly the
        verdicts of ``host_passes`` and reads only the shared HostState; the engine then runs
        it over the request's hosts in one numpy expression.
        """
        return None


class Verdict(Protocol):
    """What a candidate check returns (NUMA FitResult, PCI PciCheck)."""

    @property
    def ok(self) -> bool: ...
    @property
    def code(self) -> str | None: ...
    @property
    def detail(self) -> str: ...


class JudgedHostFilter(BaseHostFilter):
    """A filter whose verdict carries a human-readable detail (NUMA, PCI).

    ``host_passes`` prunes the host's allocation candidates, logs the detail at DEBUG (nova
    collapses these into one message; operators need the real cause) and turns a bug or odd
    host data into ``"<reason_prefix>:internal-error"`` for that host instead of failing the
    request. ``diagnose`` gives the same verdict without pruning.
    """

    reason_prefix: ClassVar[str] = ""

    def judge(
        self, host: HostCandidate, spec: RequestSpec, *, prune: bool
    ) -> tuple[str | None, str]:
        """(reason code or None, detail); prune the candidates that do not fit when ``prune``."""
        raise NotImplementedError

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        log = logging.getLogger(type(self).__module__)  # per-filter logger, as operators expect
        try:
            code, detail = self.judge(host, spec, prune=True)
        except Exception:  # a bug or odd data must cost one host, never the request
            log.exception(
                "%s check of %s failed for instance %s",
                self.name,
                host.state.nodename,
                spec.instance_uuid,
            )
            return f"{self.reason_prefix}:internal-error"
        if code is not None:
            log.debug(
                "%s (%s) fails %s for instance %s: %s (%s)",
                host.state.host,
                host.state.nodename,
                self.name,
                spec.instance_uuid,
                code,
                detail,
            )
        return code

    def diagnose(self, host: HostCandidate, spec: RequestSpec) -> tuple[str | None, str]:
        """(reason code, human-readable reason) without pruning ``host``'s candidates."""
        return self.judge(host, spec, prune=False)

    def judge_candidates(
        self,
        host: HostCandidate,
        check: Callable[[Mapping[str, Any] | None], Verdict],
        *,
        prune: bool,
        memo_key: Callable[[Mapping[str, Any] | None], Hashable] | None = None,
    ) -> tuple[str | None, str]:
        """nova's CandidateFilterMixin: keep the candidates whose provider mapping passes.

        The host fails with the last failing verdict when none remains. Without candidates
        (the rebuild path) the host itself is judged. ``memo_key`` lets candidates that differ
        only in what the check ignores share one check.
        """
        memo: dict[Hashable, Verdict] = {}

        def judged(mapping: Mapping[str, Any] | None) -> Verdict:
            if memo_key is None:
                return check(mapping)
            key = memo_key(mapping)
            if key not in memo:
                memo[key] = check(mapping)
            return memo[key]

        if not host.allocation_candidates:
            verdict = judged(None)
            if verdict.ok:
                return None, ""
            return verdict.code or f"{self.reason_prefix}:no-fit", verdict.detail
        good = []
        last: Verdict | None = None
        for cand in host.allocation_candidates:
            mappings = cand.get("mappings") if isinstance(cand, dict) else None
            verdict = judged(mappings if isinstance(mappings, dict) else None)
            if verdict.ok:
                good.append(cand)
            else:
                last = verdict
        if prune:
            host.allocation_candidates[:] = good
        if good or last is None:
            return None, ""
        return last.code or f"{self.reason_prefix}:no-fit", last.detail
