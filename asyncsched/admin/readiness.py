"""Is this process fit to take scheduling requests? A pure verdict over the health snapshot.

``/readyz`` asks this; keeping it a function of :meth:`Service.health` (plus one Placement
probe result) means the rule is written once and tested without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ReadyLimits:
    """How old the databases' last good read may be before we stop calling ourselves ready."""

    max_state_age: float


def not_ready_reasons(
    snapshot: Mapping[str, Any], limits: ReadyLimits, placement_error: str | None
) -> list[str]:
    """Every reason the process is not ready, one line each; empty = ready.

    ``snapshot`` is ``Service.health()``; ``placement_error`` the outcome of the latest
    reachability probe (None = Placement answered).
    """
    reasons: list[str] = []
    state = snapshot.get("state")
    if state != "running":
        reasons.append(f"service is {state}")
    comps: Mapping[str, Any] = snapshot.get("components") or {}
    reasons += _rpc(comps.get("rpc"))
    reasons += _host_state(comps.get("hoststate"), limits)
    reasons += _mirror(comps.get("placement_mirror"))
    if placement_error is not None:
        reasons.append(f"placement: unreachable: {placement_error}")
    return reasons


def _rpc(rpc: Mapping[str, Any] | None) -> list[str]:
    if rpc is None:
        return ["rpc: no AMQP consumers configured"]
    if "error" in rpc:
        return [f"rpc: health failed: {rpc['error']}"]
    if not rpc.get("connected"):
        return [f"rpc: not connected to RabbitMQ ({rpc.get('last_error') or 'connecting'})"]
    if not rpc.get("accepting"):
        return ["rpc: consumers are not up"]
    return []


def _host_state(cache: Mapping[str, Any] | None, limits: ReadyLimits) -> list[str]:
    if cache is None:
        return ["hoststate: no host-state cache"]
    if "error" in cache:
        return [f"hoststate: health failed: {cache['error']}"]
    out = []
    api = cache.get("api") or {}
    out += _db_age("hoststate: API database", api, limits)
    for uuid, cell in sorted((cache.get("cells") or {}).items()):
        out += _db_age(f"hoststate: cell {cell.get('name') or uuid}", cell, limits)
    # an enabled cell whose database URL cannot be used: its hosts would silently never be
    # scheduled, so the process says it is not ready and names the cell
    for _, why in sorted((cache.get("unusable_cells") or {}).items()):
        out.append(f"hoststate: {why}; its hosts cannot be scheduled")
    return out


def _db_age(what: str, db: Mapping[str, Any], limits: ReadyLimits) -> list[str]:
    if not db.get("loaded"):
        return [f"{what} not loaded yet ({db.get('last_error') or 'loading'})"]
    age = db.get("age")
    if age is None or age > limits.max_state_age:
        shown = "never" if age is None else f"{age:.1f} s ago"
        err = db.get("last_error")
        return [
            f"{what} last read {shown} (limit {limits.max_state_age:g} s)"
            + (f": {err}" if err else "")
        ]
    return []


def _mirror(mirror: Mapping[str, Any] | None) -> list[str]:
    """The Placement mirror (when configured) knows its own age limit: trust its verdict."""
    if mirror is None:
        return []
    if "error" in mirror:
        return [f"placement_mirror: health failed: {mirror['error']}"]
    if mirror.get("serving") is False:
        return [f"placement_mirror: not serving ({mirror.get('reason') or 'unknown'})"]
    return []
