"""One cell's index: what its database says (node snapshots, services, instances per host,
instances' image properties), and the diffing that turns a read into the nodes to rebuild.

Why pure: the diff functions do no I/O, never await and never touch a ``HostState``; they
update the index and return the dirty node uuids, so refresh logic is unit-tested without a
database. The cache then rebuilds exactly those hosts (``assumptions.rebase``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncsched.state.beats import beat_only
from asyncsched.state.host_state import HostState, ServiceInfo
from asyncsched.state.images import ImageProps, PropsRead
from asyncsched.state.rows import NodeSnapshot, service_info

# (services.id, host, ServiceInfo or None when the row is deleted); deleted rows first
ServiceRow = tuple[int, str, ServiceInfo | None]


@dataclass(eq=False)
class NodeRead:
    """What one read of compute_nodes found."""

    snaps: dict[str, NodeSnapshot] = field(default_factory=dict)  # live, parsed or reused
    sigs: dict[str, int] = field(default_factory=dict)  # signatures of newly parsed rows
    live: set[str] = field(default_factory=set)  # every live uuid, parsed or not
    deleted: set[str] = field(default_factory=set)


@dataclass(eq=False)
class CellIndex:
    """The database side of one cell; mutated only by the cache and the functions here."""

    snaps: dict[str, NodeSnapshot] = field(default_factory=dict)  # node uuid -> snapshot
    sigs: dict[str, int] = field(default_factory=dict)  # node uuid -> hash of its raw row
    nodes_by_host: dict[str, set[str]] = field(default_factory=dict)
    services: dict[str, ServiceInfo] = field(default_factory=dict)  # host -> nova-compute
    host_insts: dict[str, set[str]] = field(default_factory=dict)  # host -> instance uuids
    inst_host: dict[str, str] = field(default_factory=dict)  # instance uuid -> host
    # instance uuid -> image properties (only instances on a host, only while wanted)
    image_props: dict[str, ImageProps] = field(default_factory=dict)
    image_props_loaded: bool = False  # a full read succeeded since they were wanted
    # host -> (raw services row, its ServiceInfo): the watermark overlap re-reads each
    # heartbeat's rows several times, and most re-read rows have not changed since
    service_rows: dict[str, tuple[tuple[Any, ...], ServiceInfo]] = field(default_factory=dict)
    # services.id -> the stamps (updated_at, created_at, deleted_at, as one text: ``sql.
    # _stamp``) of the row as last applied: an incremental read fetches rows only where the
    # stamp moved
    service_stamps: dict[int, str] = field(default_factory=dict)
    # services.id -> (signature of all but the heartbeat, the ServiceInfo read with it): a
    # changed row with the same signature is a heartbeat, read narrow (``readers.py``)
    service_sigs: dict[int, tuple[str, ServiceInfo]] = field(default_factory=dict)

    def service_of(self, row: Mapping[str, Any]) -> ServiceInfo:
        """The ServiceInfo of a live services row, parsed again only when the row changed."""
        raw = tuple(row.values())
        host = row["host"]
        seen = self.service_rows.get(host)
        if seen is not None and seen[0] == raw:
            return seen[1]
        svc = service_info(row)
        self.service_rows[host] = (raw, svc)
        return svc

    def forget_snap(self, node_uuid: str) -> None:
        snap = self.snaps.pop(node_uuid, None)
        self.sigs.pop(node_uuid, None)
        if snap is not None:
            nodes = self.nodes_by_host.get(snap.host)
            if nodes is not None:
                nodes.discard(node_uuid)
                if not nodes:
                    del self.nodes_by_host[snap.host]

    def move_instance(self, inst_uuid: str, host: str | None) -> None:
        before = self.inst_host.pop(inst_uuid, None)
        if before is not None:
            s = self.host_insts.get(before)
            if s is not None:
                s.discard(inst_uuid)
        if host is not None:
            self.inst_host[inst_uuid] = host
            self.host_insts.setdefault(host, set()).add(inst_uuid)
        else:  # gone (or hostless): a later appearance re-reads its image properties
            self.image_props.pop(inst_uuid, None)

    def move_to_host(self, host: str, inst_uuids: Iterable[str]) -> set[str]:
        """Put these instances on ``host``; returns it and the hosts they left."""
        touched = {host}
        for u in inst_uuids:
            before = self.inst_host.get(u)
            if before is not None:
                touched.add(before)
            self.move_instance(u, host)
        return touched

    def nodes_of(self, hosts: Iterable[str]) -> set[str]:
        nodes: set[str] = set()
        for h in hosts:
            nodes |= self.nodes_by_host.get(h, set())
        return nodes


def apply_image_props(index: CellIndex, read: PropsRead | None) -> set[str]:
    """Take a props read (after the pass's instance moves); returns the hosts whose
    instances' image properties changed."""
    if read is None:
        return set()
    changed: set[str] = set()
    old = index.image_props
    if read.uuids is None:
        new = {u: p for u, p in read.props.items() if u in index.inst_host}
        if not index.image_props_loaded:  # first load: every host gets its view
            changed.update(index.nodes_by_host)
        for u in old.keys() | new.keys():
            if old.get(u) is not new.get(u):
                host = index.inst_host.get(u)
                if host is not None:
                    changed.add(host)
        index.image_props = new
        index.image_props_loaded = True
    else:
        for u in read.uuids:
            p = read.props.get(u) if u in index.inst_host else None
            if old.get(u) is not p:
                if p is None:
                    old.pop(u, None)
                else:
                    old[u] = p
                host = index.inst_host.get(u)
                if host is not None:
                    changed.add(host)
    return changed


def diff_full(
    index: CellIndex,
    table: Mapping[str, HostState],
    services: Sequence[ServiceRow],
    nodes: NodeRead,
    insts: dict[str, str | None],
    props: PropsRead | None = None,
    beats: dict[str, str] | None = None,
) -> set[str]:
    """A full read replaces the index; returns the nodes whose host must be rebuilt.

    ``table`` is the cell's visible hosts; ``insts`` maps every live instance to its host;
    ``props`` is None unless image properties are wanted and were read. A node whose only
    news is its service's heartbeat goes into ``beats`` (uuid -> host) when given, to be
    swapped rather than rebuilt."""
    new_services = {host: svc for _, host, svc in services if svc is not None}
    snaps = nodes.snaps
    # keep the last values of a live node whose usage is "not updated yet"
    for u in nodes.live - set(snaps):
        old = index.snaps.get(u)
        if old is not None:
            snaps[u] = old
    dirty = (set(index.snaps) | set(table)) ^ set(snaps)
    moved_hosts: set[str] = set()
    for u in set(index.inst_host) - set(insts):
        moved_hosts.add(index.inst_host[u])
        index.move_instance(u, None)
    for u, host in insts.items():
        before = index.inst_host.get(u)
        if before != host:
            moved_hosts.update(h for h in (before, host) if h)
            index.move_instance(u, host)
    for h in [h for h, s in index.host_insts.items() if not s]:
        del index.host_insts[h]
    moved_hosts |= apply_image_props(index, props)
    for u, snap in snaps.items():
        hs = table.get(u)
        if hs is None or hs.assumed or index.snaps.get(u) is not snap or snap.host in moved_hosts:
            dirty.add(u)
            continue
        svc = new_services.get(snap.host)
        if svc is hs.service:
            continue
        if beats is not None and svc is not None and hs.service is not None:
            if beat_only(hs.service, svc):
                beats[u] = snap.host
                continue
        dirty.add(u)
    index.services = new_services
    index.snaps = snaps
    index.sigs = {u: sig for u, sig in index.sigs.items() if u in snaps}
    index.sigs.update(nodes.sigs)
    index.nodes_by_host = {}
    for snap in snaps.values():
        index.nodes_by_host.setdefault(snap.host, set()).add(snap.uuid)
    return dirty


@dataclass(frozen=True, slots=True)
class Changes:
    """What an incremental read changed: nodes to rebuild, and nodes whose only news is
    their service row (heartbeats: the service is swapped, nothing rebuilt)."""

    dirty: set[str]
    heartbeats: dict[str, str]  # node uuid -> host


def apply_services(index: CellIndex, services: Sequence[ServiceRow]) -> tuple[set[str], set[str]]:
    """Apply changed services rows (deleted first) to the index; returns the hosts that
    gained or lost their service (to rebuild) and those whose service only changed (swapped)."""
    dirty: set[str] = set()
    swapped: set[str] = set()
    for svc_id, host, svc in services:  # deleted rows first: a re-created host ends live
        cur = index.services.get(host)
        if svc is None:
            if cur is not None and cur.id == svc_id:
                del index.services[host]
                dirty.add(host)
        elif svc is not cur:
            index.services[host] = svc
            (swapped if cur is not None else dirty).add(host)
    return dirty, swapped


def diff_changes(
    index: CellIndex,
    table: Mapping[str, HostState],
    services: Sequence[ServiceRow],
    nodes: NodeRead,
    insts: dict[str, str | None],
    props: PropsRead | None = None,
) -> Changes:
    """Apply an incremental read (rows changed since the watermark) to the index.

    Hosts with pending assumptions are always dirty: confirmation and expiry are checked on
    every pass."""
    dirty_hosts, heartbeats = apply_services(index, services)
    dirty_nodes: set[str] = set()
    for u in nodes.deleted - nodes.live:
        if u in index.snaps:
            index.forget_snap(u)
            dirty_nodes.add(u)
    for u, snap in nodes.snaps.items():
        old = index.snaps.get(u)
        if old is not snap:
            if old is not None and old.host != snap.host:
                index.forget_snap(u)
            index.snaps[u] = snap
            index.nodes_by_host.setdefault(snap.host, set()).add(u)
            dirty_nodes.add(u)
    index.sigs.update(nodes.sigs)
    for u, ihost in insts.items():
        before = index.inst_host.get(u)
        if before != ihost:
            index.move_instance(u, ihost)
            dirty_hosts.update(h for h in (before, ihost) if h)
    dirty_hosts |= apply_image_props(index, props)
    dirty_nodes |= index.nodes_of(dirty_hosts)
    dirty_nodes |= {u for u, hs in table.items() if hs.assumed}
    beats = {
        u: h
        for h in heartbeats - dirty_hosts
        for u in index.nodes_by_host.get(h, ())
        if u not in dirty_nodes
    }
    return Changes(dirty=dirty_nodes, heartbeats=beats)
