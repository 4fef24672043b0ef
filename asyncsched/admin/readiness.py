"""Is this process fit to take scheduling requests? A pure verdict over the health snapshot.

``/readyz`` asks this; keeping it a function of :meth:`Service.health` (plus one Placement
probe result) means the rule is written once and tested without a server.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncsched.common.health import HealthFailed, ServiceHealth
from asyncsched.rpc.server import RPCHealth
from asyncsched.state.health import DatabaseHealth, HostStateHealth, MirrorHealth


@dataclass(frozen=True, slots=True)
class ReadyLimits:
    """How old the databases' last good read may be before we stop calling ourselves ready."""

    max_state_age: float


def not_ready_reasons(
    snapshot: ServiceHealth, limits: ReadyLimits, placement_error: str | None
) -> list[str]:
    """Every reason the process is not ready, one line each; empty = ready.

    ``snapshot`` is ``Service.health()``; ``placement_error`` the outcome of the latest
    reachability probe (None = Placement answered).
    """
    reasons: list[str] = []
    if snapshot.state != "running":
        reasons.append(f"service is {snapshot.state}")
    reasons += _rpc(snapshot)
    reasons += _host_state(snapshot, limits)
    reasons += _mirror(snapshot)
    if placement_error is not None:
        reasons.append(f"placement: unreachable: {placement_error}")
    return reasons


def _failed(snapshot: ServiceHealth, name: str) -> list[str]:
    """Why the component ``name`` cannot be judged: its health() failed (or is not its own)."""
    got = snapshot.components[name]
    why = got.error if isinstance(got, HealthFailed) else f"unexpected {type(got).__name__}"
    return [f"{name}: health failed: {why}"]


def _rpc(snapshot: ServiceHealth) -> list[str]:
    if "rpc" not in snapshot.components:
        return ["rpc: no AMQP consumers configured"]
    rpc = snapshot.part("rpc", RPCHealth)
    if rpc is None:
        return _failed(snapshot, "rpc")
    if not rpc.connected:
        return [f"rpc: not connected to RabbitMQ ({rpc.last_error or 'connecting'})"]
    if not rpc.accepting:
        return ["rpc: consumers are not up"]
    return []


def _host_state(snapshot: ServiceHealth, limits: ReadyLimits) -> list[str]:
    if "hoststate" not in snapshot.components:
        return ["hoststate: no host-state cache"]
    cache = snapshot.part("hoststate", HostStateHealth)
    if cache is None:
        return _failed(snapshot, "hoststate")
    out = _db_age("hoststate: API database", cache.api, limits)
    for uuid, cell in sorted(cache.cells.items()):
        out += _db_age(f"hoststate: cell {cell.name or uuid}", cell, limits)
    # an enabled cell whose database URL cannot be used: its hosts would silently never be
    # scheduled, so the process says it is not ready and names the cell
    for _, why in sorted(cache.unusable_cells.items()):
        out.append(f"hoststate: {why}; its hosts cannot be scheduled")
    return out


def _db_age(what: str, db: DatabaseHealth, limits: ReadyLimits) -> list[str]:
    if not db.loaded:
        return [f"{what} not loaded yet ({db.last_error or 'loading'})"]
    age = db.age
    if age is None or age > limits.max_state_age:
        shown = "never" if age is None else f"{age:.1f} s ago"
        err = db.last_error
        return [
            f"{what} last read {shown} (limit {limits.max_state_age:g} s)"
            + (f": {err}" if err else "")
        ]
    return []


def _mirror(snapshot: ServiceHealth) -> list[str]:
    """The Placement mirror (when configured) knows its own age limit: trust its verdict."""
    if "placement_mirror" not in snapshot.components:
        return []
    mirror = snapshot.part("placement_mirror", MirrorHealth)
    if mirror is None:
        return _failed(snapshot, "placement_mirror")
    if not mirror.serving:
        return [f"placement_mirror: not serving ({mirror.reason or 'unknown'})"]
    return []
