"""CPU seconds taken by each party of a benchmark phase, from ``/proc`` (user + system).

On a 2-core machine every party shares the same cores: what the scheduler daemon, its
callers and the broker spend is CPU Placement does not get, so a boot rate below Placement's
own claim rate is read here as CPU per boot, party by party. PostgreSQL backends are counted
per database (``pg_stat_activity``), so Placement's and the daemon's queries stay apart. A
process that exits within the phase loses its last share; the figures are a lower bound.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import psutil  # type: ignore[import-untyped]  # (oslo.utils brings it; no stubs)

Pids = Callable[[], Iterable[int]]


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (gunicorn's master and its workers)."""
    try:
        p = psutil.Process(pid)
        return [pid, *(c.pid for c in p.children(recursive=True))]
    except psutil.Error:
        return []


def cpu_of(pids: Iterable[int]) -> dict[int, float]:
    out: dict[int, float] = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        out[pid] = t.user + t.system + t.children_user + t.children_system
    return out


def pg_backends_of(clients: Iterable[int]) -> list[int]:
    """The PostgreSQL backends serving the connections of the processes ``clients``."""
    ports: set[int] = set()
    for pid in clients:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        ports.update(c.laddr.port for c in conns if c.raddr and c.raddr.port == 5432)
    if not ports:
        return []
    backends = []
    for p in psutil.process_iter(["name", "cmdline"]):
        if p.info["name"] != "postgres":
            continue
        try:
            conns = p.net_connections(kind="tcp")
        except psutil.Error:
            continue
        if any(c.raddr and c.raddr.port in ports for c in conns):
            backends.append(p.pid)
    return backends


class CpuMeter:
    """``start()`` then ``stop()``: CPU seconds per named party over the phase."""

    def __init__(self, parties: dict[str, Pids]) -> None:
        self.parties = parties
        self._t0: dict[str, dict[int, float]] = {}

    def start(self) -> None:
        # the processes first (finding PostgreSQL's backends scans every postgres process's
        # sockets: tens of ms each), then every party's CPU in one quick pass, so that the
        # window starts at one instant for all
        found = {name: list(pids()) for name, pids in self.parties.items()}
        self._t0 = {name: cpu_of(pids) for name, pids in found.items()}

    def stop(self) -> dict[str, float]:
        """The processes known at ``start`` are read at once (the window ends at one
        instant); those that appeared since (a new connection's backend) after."""
        known = {name: cpu_of(before) for name, before in self._t0.items()}
        out: dict[str, float] = {}
        for name, pids in self.parties.items():
            before = self._t0.get(name, {})
            now = known.get(name, {})
            now.update(cpu_of(set(pids()) - set(before)))
            out[name] = sum(now[p] - before.get(p, 0.0) for p in now)
        return out


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (every core: not idle, not waiting)."""
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + t.irq + t.softirq + getattr(t, "steal", 0.0))


def me() -> list[int]:
    return [os.getpid()]


def pg_connections(pids: Iterable[int]) -> int:
    """How many TCP connections to PostgreSQL (port 5432) the processes ``pids`` hold."""
    n = 0
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except psutil.Error:
            continue
        n += sum(1 for c in conns if c.raddr and c.raddr.port == 5432)
    return n
