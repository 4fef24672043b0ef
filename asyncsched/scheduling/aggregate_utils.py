"""Aggregate metadata helpers shared by the aggregate filters and the weigher multipliers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

from asyncsched.state.host_state import HostState

LOG = logging.getLogger(__name__)

T = TypeVar("T", int, float)


def aggregate_values_from_key(host: HostState, key: str) -> set[str]:
    """The set of values of ``key`` over the host's aggregates (nova semantics)."""
    return {a.metadata[key] for a in host.aggregates if key in a.metadata}


def aggregate_metadata_get_by_host(host: HostState) -> dict[str, set[str]]:
    """Every metadata key of the host's aggregates -> the union of its comma-split values."""
    out: dict[str, set[str]] = {}
    for agg in host.aggregates:
        for k, v in agg.metadata.items():
            out.setdefault(k, set()).update(x.strip() for x in v.split(","))
    return out


def validate_num_values(vals: Iterable[str], default: T, cast: Callable[[str], T]) -> T:
    """The minimum of the values cast with ``cast``, or ``default`` if there are none."""
    values = list(vals)
    if not values:
        return default
    return min(cast(v) for v in values)


def weight_multiplier(host: HostState, key: str, config_value: float) -> float:
    """nova's get_weight_multiplier: min of aggregate overrides, else the config value."""
    vals = aggregate_values_from_key(host, key)
    if not vals:
        return config_value
    try:
        return validate_num_values(vals, config_value, float)
    except ValueError:
        LOG.warning("Could not decode %s from aggregate metadata of %s", key, host.host)
        return config_value
