"""Selection values as nova builds them from a chosen host (``Selection.from_host_state``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from asyncsched.conf.options import Config
from asyncsched.objects.models import NUMATopologyLimits, SchedulerLimits, Selection
from asyncsched.state.host_state import HostState

NOT_ENOUGH = "There are not enough hosts available."


def availability_zone(host: HostState, config: Config) -> str:
    """The host's AZ from aggregate metadata, else ``[DEFAULT] default_availability_zone``."""
    for agg in host.aggregates:
        az = agg.metadata.get("availability_zone")
        if az and az.split(",")[0].strip():
            return az.split(",")[0].strip()
    return config.default.default_availability_zone


def make_selection(
    host: HostState,
    config: Config,
    *,
    allocation_request: Mapping[str, Any] | None,
    version: str | None,
    limits: Mapping[str, Any] | None = None,
) -> Selection:
    """Selection.from_host_state: allocation_request as a JSON string ("null" when none)."""
    numa = (limits or {}).get("numa_topology")
    return Selection(
        compute_node_uuid=host.uuid,
        service_host=host.host,
        nodename=host.nodename,
        cell_uuid=host.cell_uuid,
        limits=SchedulerLimits(
            numa_topology=numa if isinstance(numa, NUMATopologyLimits) else None
        ),
        allocation_request=json.dumps(allocation_request),
        allocation_request_version=version,
        availability_zone=availability_zone(host, config),
    )


def host_selection(
    host: HostState,
    config: Config,
    alloc: Mapping[str, Any] | None,
    version: str | None,
    limits: Mapping[str, Any] | None = None,
) -> Selection:
    """The Selection step of both drivers: ``version`` is given only beside an allocation
    request (nova leaves it unset on a Selection without one)."""
    return make_selection(
        host,
        config,
        allocation_request=alloc,
        version=version if alloc is not None else None,
        limits=limits,
    )
