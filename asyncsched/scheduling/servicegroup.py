"""nova's DB servicegroup rule: is a nova-compute service up?

A service is up unless it is forced down or its last heartbeat (``last_seen_up``, else
``created_at``) is more than ``service_down_time`` seconds away from now, either way. Naive
datetimes are UTC (nova's DB). ComputeFilter and the chance driver ask this; ComputeFilter's
column mask is the same rule over :func:`heartbeat_ts`.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from asyncsched.common.clock import as_utc
from asyncsched.state.host_state import ServiceInfo

_NAN = float("nan")


def heartbeat(svc: ServiceInfo) -> datetime | None:
    """The service's last sign of life (nova: ``last_seen_up or created_at``)."""
    return svc.heartbeat


def heartbeat_ts(svc: ServiceInfo | None) -> float:
    """:func:`heartbeat` as a UTC timestamp; NaN when there is none."""
    if svc is None:
        return _NAN
    beat = heartbeat(svc)
    if beat is None:
        return _NAN
    return as_utc(beat).timestamp()


def service_is_up(svc: ServiceInfo, now: datetime, down_time: timedelta) -> bool:
    """nova's ``DbDriver.is_up`` (``now`` aware UTC, see :func:`as_utc`)."""
    if svc.forced_down:
        return False
    beat = heartbeat(svc)
    if beat is None:
        return False
    return abs(now - as_utc(beat)) <= down_time
