"""Heartbeats that cost no rebuild: a compute's report swaps its host's service, no touch.

Why: 10,000 computes report every 10 s, and each report moves only ``last_seen_up`` (and
``updated_at``) of its services row. A touch (``HostState.generation``) makes every derived
view rebuild the host (the scheduler's column row, its kept verdicts): 1,000 rebuilds a
second for a value only ComputeFilter reads, and only against the clock. So a heartbeat
replaces ``HostState.service`` and leaves the generation alone. What a derived view built at
the host's generation holds of the heartbeat (ComputeFilter's ``heartbeat`` column) is then
a *lower bound* of the host's heartbeat, and the up/down verdict stays exact:

* a view's heartbeat that says "up" is right: the host's own is the same or newer (only a
  heartbeat that moves forward and is not ahead of our clock is swapped without a touch;
  one that moves back, e.g. a row rewritten by hand, or lies ahead is a touch);
* one that says "down" may be old: ComputeFilter reads those hosts' service again;
* a heartbeat is a touch once the views' copy is older than ``keep`` seconds, so that
  re-read stays rare (a host is touched about every ``keep`` seconds, not at every report);
* so a beat the views miss is at most ``keep`` (never more than ``service_down_time``) newer
  than their copy: a copy older than :func:`hidden_beats_horizon` says "down" rightly, and
  a host dead that long (a dead compute, a suspect of every request) is not read again.

Anything else a services row says (disabled, forced down, version, a new row) is a touch,
as before: the verdicts of a host just enabled, disabled or forced down change at once.
"""

from __future__ import annotations

from datetime import datetime

from asyncsched.common.clock import as_utc
from asyncsched.state.host_state import HostState, ServiceInfo


def keep_seconds(down_time: float, report_interval: float, refresh_interval: float) -> float:
    """How old the views' heartbeat of a host may grow before a report touches the host:
    short of ``service_down_time`` by one report and two refreshes, so the touch comes
    before the views' copy says "down" (which ComputeFilter would read again); at least
    half of it."""
    return max(down_time - report_interval - 2.0 * refresh_interval, down_time / 2.0)


def hidden_beats_horizon(down_time: float) -> float:
    """How old the views' copy of a heartbeat may be and still hide a newer beat: swaps stop
    ``keep`` (at most ``down_time``, :func:`keep_seconds`) after the copy and a swapped beat
    is never ahead of the refresher's clock, so the host's own beat is at most ``keep``
    newer; a copy older than ``keep + down_time`` is "down" whatever the host holds."""
    return 2.0 * down_time


def _rest(s: ServiceInfo) -> tuple[object, ...]:
    """Everything of a service but its heartbeat stamps."""
    return (
        s.id,
        s.host,
        s.binary,
        s.disabled,
        s.disabled_reason,
        s.forced_down,
        s.created_at,
        s.version,
        s.uuid,
    )


def with_beat(
    s: ServiceInfo, last_seen_up: datetime | None, updated_at: datetime | None
) -> ServiceInfo:
    """``s`` with a new heartbeat (``dataclasses.replace`` without its per-call walk over
    the fields: 1,000 of these a second at 10,000 hosts)."""
    return ServiceInfo(
        s.id,
        s.host,
        s.binary,
        s.disabled,
        s.disabled_reason,
        s.forced_down,
        last_seen_up,
        s.created_at,
        updated_at,
        s.version,
        s.uuid,
    )


def beat_only(old: ServiceInfo, new: ServiceInfo) -> bool:
    """``new`` is ``old`` with a heartbeat that did not move back, and nothing else changed."""
    if _rest(old) != _rest(new):
        return False
    was, now = old.heartbeat, new.heartbeat
    return was is not None and now is not None and as_utc(now) >= as_utc(was)


def swap_beat(
    hs: HostState, new: ServiceInfo, now: datetime, keep: float, report: float = 0.0
) -> bool:
    """Give ``hs`` the service ``new`` without a touch when that is a heartbeat the views
    may miss (see the module); False (nothing done) when the caller must touch. ``keep``
    allows for reports ``report`` seconds apart; a host whose last two came further apart
    (a slow compute, a late read) is touched that much sooner. Caller holds ``hs.lock``;
    ``now`` is aware UTC."""
    old = hs.service
    if new is old:
        return True
    if old is None or not beat_only(old, new):
        return False
    beat, was = new.heartbeat, old.heartbeat
    if beat is None or was is None or as_utc(beat) > now:
        return False
    gap = (as_utc(beat) - as_utc(was)).total_seconds()
    mark = hs.beat_floor
    floor = mark[1] if mark is not None and mark[0] == hs.generation else was
    if floor is None or (now - as_utc(floor)).total_seconds() > keep - max(0.0, gap - report):
        return False
    hs.service = new
    hs.beat_floor = (hs.generation, floor)
    return True
