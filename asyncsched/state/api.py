"""The API-database pass: cell mappings, host mappings and aggregates.

Why a fingerprint: these tables change rarely, so each pass first reads one row of counts,
newest timestamps and id sums, and re-reads only the tables whose part changed. The cache
applies what was read (``HostStateCache._apply_cells`` etc.) in the same order.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from asyncsched.objects.models import Aggregate
from asyncsched.state.db import NovaDatabase
from asyncsched.state.sql import (
    SQL_AGGREGATE_HOSTS,
    SQL_AGGREGATE_METADATA,
    SQL_AGGREGATES,
    SQL_API_FINGERPRINT,
    SQL_CELLS,
    SQL_HOST_MAPPINGS,
)

LOG = logging.getLogger(__name__)

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
_AGG_KEYS = ("aggs", "agg_hosts", "agg_meta")


async def api_pass(
    db: NovaDatabase,
    old: Mapping[str, str],
    *,
    on_cells: Callable[[Sequence[Any]], Awaitable[None]],
    on_host_mappings: Callable[[dict[str, str]], None],
    on_aggregates: Callable[[dict[int, Aggregate]], Awaitable[None]],
) -> dict[str, str]:
    """Read what changed since fingerprint ``old`` ({} reads everything), hand each part
    to its callback as soon as it is read, and return the new fingerprint. Raises
    ``DatabaseUnavailable`` (parts already handed over stay applied)."""
    fp_rows = await db.fetch(SQL_API_FINGERPRINT)
    fp = {k: str(v) for k, v in fp_rows[0].items()}
    if fp.get("cells") != old.get("cells"):
        await on_cells(await db.fetch(SQL_CELLS))
    if fp.get("hosts") != old.get("hosts"):
        rows = await db.fetch(SQL_HOST_MAPPINGS)
        on_host_mappings({r["host"]: r["uuid"] for r in rows})
    if any(fp.get(k) != old.get(k) for k in _AGG_KEYS):
        aggs = await db.fetch(SQL_AGGREGATES)
        hosts = await db.fetch(SQL_AGGREGATE_HOSTS)
        meta = await db.fetch(SQL_AGGREGATE_METADATA)
        await on_aggregates(parse_aggregates(aggs, hosts, meta))
    return fp


def wanted_cells(rows: Sequence[Any]) -> dict[str, Any]:
    """cell_mappings rows the cache loads: not cell0, enabled, with a database."""
    wanted: dict[str, Any] = {}
    for r in rows:
        if r["uuid"] == CELL0_UUID or r["disabled"]:
            continue
        if not r["database_connection"]:
            LOG.warning("cell %s (%s) has no database_connection; ignored", r["name"], r["uuid"])
            continue
        wanted[r["uuid"]] = r
    return wanted


def parse_aggregates(
    aggs: Sequence[Any], hosts: Sequence[Any], meta: Sequence[Any]
) -> dict[int, Aggregate]:
    by_id_hosts: dict[int, list[str]] = {}
    for r in hosts:
        if r["host"]:
            by_id_hosts.setdefault(r["aggregate_id"], []).append(r["host"])
    by_id_meta: dict[int, dict[str, str]] = {}
    for r in meta:
        by_id_meta.setdefault(r["aggregate_id"], {})[r["key"]] = r["value"]
    return {
        r["id"]: Aggregate(
            id=r["id"],
            uuid=r["uuid"] or "",
            name=r["name"] or "",
            hosts=tuple(by_id_hosts.get(r["id"], ())),
            metadata=by_id_meta.get(r["id"], {}),
        )
        for r in aggs
    }


@dataclass(eq=False)
class AggregateIndex:
    """Aggregates by id and by host. Each change returns the hosts it touched; ``recompute``
    then gives those hosts their aggregates (in id order, as nova)."""

    aggs: dict[int, Aggregate] = field(default_factory=dict)
    agg_hosts: dict[int, frozenset[str]] = field(default_factory=dict)
    host_aggs: dict[str, tuple[Aggregate, ...]] = field(default_factory=dict)

    def replace_all(self, new: dict[int, Aggregate]) -> set[str]:
        touched: set[str] = set()
        for agg_id in set(new) | set(self.aggs):
            a, b = self.aggs.get(agg_id), new.get(agg_id)
            if a != b:
                touched |= set(a.hosts if a else ()) | set(b.hosts if b else ())
        self.aggs = new
        self.agg_hosts = {i: frozenset(a.hosts) for i, a in new.items()}
        return touched

    def update(self, aggregates: Iterable[Aggregate]) -> set[str]:
        """nova's semantics: replace each aggregate; hosts no longer listed lose it."""
        touched: set[str] = set()
        for agg in aggregates:
            touched |= self.agg_hosts.get(agg.id, frozenset())
            touched |= set(agg.hosts)
            self.aggs[agg.id] = agg
            self.agg_hosts[agg.id] = frozenset(agg.hosts)
        return touched

    def delete(self, aggregate: Aggregate) -> set[str]:
        touched = set(self.agg_hosts.pop(aggregate.id, frozenset())) | set(aggregate.hosts)
        self.aggs.pop(aggregate.id, None)
        return touched

    def recompute(self, hosts: Iterable[str]) -> dict[str, tuple[Aggregate, ...]]:
        by_host: dict[str, list[Aggregate]] = {}
        hosts = set(hosts)
        for agg_id in sorted(self.agg_hosts):
            for h in self.agg_hosts[agg_id] & hosts:
                by_host.setdefault(h, []).append(self.aggs[agg_id])
        out: dict[str, tuple[Aggregate, ...]] = {}
        for h in hosts:
            aggs = tuple(by_host.get(h, ()))
            if aggs:
                self.host_aggs[h] = aggs
            else:
                self.host_aggs.pop(h, None)
            out[h] = aggs
        return out
