"""Shared pieces of the request pre-filters: the failure type and spec-update helpers.

A pre-filter is a pure function ``(ctx, spec, config, aggregates) -> RequestSpec``: it returns
the spec unchanged or a new one with ``requested_destination`` / ``request_level_params`` /
``requested_resources`` narrowed, exactly as nova's ``request_filter`` mutates its RequestSpec.
``aggregates`` comes from the host-state cache; no pre-filter touches a database.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from asyncsched.conf.options import Config
from asyncsched.exceptions import AsyncschedError
from asyncsched.objects.models import Aggregate, Destination, RequestContext, RequestSpec

Prefilter = Callable[[RequestContext, RequestSpec, Config, Sequence[Aggregate]], RequestSpec]


class RequestFilterFailed(AsyncschedError):
    """nova's RequestFilterFailed: the request cannot be served; becomes NoValidHost(reason)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def add_root_required(spec: RequestSpec, *traits: str) -> RequestSpec:
    return _add_root_traits(spec, required=traits)


def add_root_forbidden(spec: RequestSpec, *traits: str) -> RequestSpec:
    return _add_root_traits(spec, forbidden=traits)


def _add_root_traits(
    spec: RequestSpec, *, required: Iterable[str] = (), forbidden: Iterable[str] = ()
) -> RequestSpec:
    """``spec`` with the root provider also needing ``required`` and lacking ``forbidden``
    (the same object when it already does: most requests pass every pre-filter unchanged)."""
    rlp = spec.request_level_params
    need, refuse = frozenset(required), frozenset(forbidden)
    if need <= rlp.root_required and refuse <= rlp.root_forbidden:
        return spec
    rlp = replace(
        rlp, root_required=rlp.root_required | need, root_forbidden=rlp.root_forbidden | refuse
    )
    return replace(spec, request_level_params=rlp)


def _destination(spec: RequestSpec) -> Destination:
    return spec.requested_destination or Destination()


def require_aggregates(spec: RequestSpec, uuids: Iterable[str]) -> RequestSpec:
    """Destination.require_aggregates: one more OR-set, AND-ed with the existing ones."""
    dest = _destination(spec)
    ored = ",".join(uuids)
    return replace(spec, requested_destination=replace(dest, aggregates=(*dest.aggregates, ored)))


def forbid_aggregates(spec: RequestSpec, uuids: Iterable[str]) -> RequestSpec:
    """Destination.append_forbidden_aggregates."""
    dest = _destination(spec)
    return replace(
        spec,
        requested_destination=replace(
            dest, forbidden_aggregates=dest.forbidden_aggregates | frozenset(uuids)
        ),
    )
