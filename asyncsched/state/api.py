"""The API-database pass: cell mappings, host mappings and aggregates.

Why a fingerprint: these tables change rarely, so each pass first reads one row of counts,
newest timestamps and id sums, and re-reads only the tables whose part changed. The cache
applies what was read (``Refresher._apply_cells`` etc.) in the same order.
"""

from __future__ import annotations

import itertools
import logging
import re
import string
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from asyncsched.exceptions import AsyncschedError
from asyncsched.objects.models import Aggregate
from asyncsched.state.db import NovaDatabase
from asyncsched.state.sql import (
    SQL_AGGREGATE_HOSTS,
    SQL_AGGREGATE_METADATA,
    SQL_AGGREGATES,
    SQL_CELLS,
    SQL_HOST_MAPPINGS,
    WATERMARK_OVERLAP,
)

LOG = logging.getLogger(__name__)

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
_AGG_KEYS = ("aggs", "agg_hosts", "agg_meta")


class CellURLError(AsyncschedError):
    """A cell mapping's URL template that cannot be filled (the message names no secret)."""


#: The fields nova fills in a cell mapping's URL template (plus username1, hostname1 ... for
#: each host of a several-host transport URL).
_URL_FIELDS = ("username", "password", "hostname", "port", "scheme", "query", "fragment", "path")


class _TemplateFormatter(string.Formatter):
    """``str.format`` as nova uses it, but only plain ``{name}`` fields of the template map:
    ``{password.__class__}`` or ``{x[0]}`` in a database row is refused, not evaluated."""

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if field_name not in kwargs:
            raise CellURLError(f"unknown template field {{{field_name}}}")
        return kwargs[field_name], field_name


def format_cell_url(url: str, default: str | None, option: str) -> str:
    """nova's ``CellMapping._format_url``: fill ``{username}``, ``{password}``, ``{hostname}``,
    ``{port}``, ``{scheme}``, ``{query}``, ``{fragment}``, ``{path}`` (and the indexed
    ``{username1}`` ... of a several-host URL) from ``default``, the local ``option`` URL.

    As in nova, a URL that does not format (a literal brace) is used as it stands when it holds
    no template field. A template that cannot be filled raises ``CellURLError``."""
    if "{" not in url and "}" not in url:
        return url
    try:
        if default is None:
            raise CellURLError(f"its URL is a template but {option} connection is not set")
        return _TemplateFormatter().vformat(url, (), _template_fields(default))
    except (CellURLError, ValueError, IndexError) as exc:
        if not _TEMPLATE_FIELD.search(url):
            return url  # nova: "Failed to parse ... to format cell mapping", URL unchanged
        if isinstance(exc, CellURLError):
            raise
        raise CellURLError(f"its URL template does not format ({exc})") from None


_TEMPLATE_FIELD = re.compile(r"\{(?:" + "|".join(_URL_FIELDS) + r")\d*+[^{}]*+\}")


def _template_fields(default: str) -> dict[str, Any]:
    parts = urlsplit(default)
    try:
        port = parts.port
    except ValueError:
        raise CellURLError("the local URL has a bad port") from None
    subs: dict[str, Any] = {
        "username": parts.username,
        "password": parts.password,
        "hostname": parts.hostname,
        "port": port,
        "scheme": parts.scheme,
        "query": parts.query,
        "fragment": parts.fragment,
        "path": parts.path.lstrip("/"),
    }
    if "," in parts.netloc:
        for index, netloc in enumerate(parts.netloc.split(","), 1):
            for key, value in _netloc_fields(netloc).items():
                subs[f"{key}{index}"] = value
    return subs


def _netloc_fields(netloc: str) -> dict[str, Any]:
    """nova's ``_parse_netloc``: ``user:pass@host:port`` of one host of several."""
    userpass, at, hostport = netloc.partition("@")
    if not at:
        userpass, hostport = "", netloc
    host, port = _host_port(hostport)
    username, colon, password = userpass.partition(":")
    return {
        "username": username,
        "password": password if colon else None,
        "hostname": host,
        "port": port,
    }


def _host_port(address: str) -> tuple[str | None, int | None]:
    """oslo.utils ``parse_host_port`` without a default port."""
    if not address:
        return None, None
    if address.startswith("["):
        host, _, rest = address[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else ""
    elif address.count(":") == 1:
        host, _, port_text = address.partition(":")
    else:
        host, port_text = address, ""
    try:
        return host, int(port_text) if port_text else None
    except ValueError:
        raise CellURLError(f"bad port {port_text!r} in the local URL") from None


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
    fp_rows = await db.fetch(db.sql.api_fingerprint)
    fp = fingerprint(fp_rows[0])
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


_READS = itertools.count()


def fingerprint(row: Mapping[str, Any]) -> dict[str, str]:
    """The parts of the API fingerprint (``count/newest stamp[/sum of ids]``), each made
    unique to this read while its newest stamp is within ``WATERMARK_OVERLAP`` of the DB's
    clock (``now``): nova's stamps are whole seconds on MySQL and come from the writer's
    clock, so a row changed again within the second already read leaves count and stamp as
    they were; such a part is read again until its newest change is old enough."""
    now: datetime = row["now"]
    out: dict[str, str] = {}
    for key, value in row.items():
        if key == "now":
            continue
        text = str(value)
        stamp = text.split("/")[1] if text.count("/") else ""
        try:
            recent = bool(stamp) and datetime.fromisoformat(stamp) >= now - WATERMARK_OVERLAP
        except ValueError:
            recent = True  # cannot tell: read it
        out[key] = f"{text}/read {next(_READS)}" if recent else text  # never equal
    return out


@dataclass(frozen=True, slots=True)
class WantedCells:
    """The cells to load (their rows, URLs filled) and the enabled ones that cannot be:
    uuid -> ``cell NAME: why``, for ``/readyz`` to name."""

    rows: Mapping[str, Mapping[str, Any]]
    unusable: Mapping[str, str]


def wanted_cells(rows: Sequence[Any], database_connection: str | None) -> WantedCells:
    """cell_mappings rows the cache loads: not cell0, enabled, with a database whose URL
    template (if it is one) is filled from ``[database] connection`` as nova fills it."""
    wanted: dict[str, Mapping[str, Any]] = {}
    unusable: dict[str, str] = {}
    for r in rows:
        if r["uuid"] == CELL0_UUID or r["disabled"]:
            continue
        label = f"cell {r['name'] or r['uuid']}"
        if not r["database_connection"]:
            LOG.warning("cell %s (%s) has no database_connection; ignored", r["name"], r["uuid"])
            unusable[r["uuid"]] = f"{label}: no database_connection"
            continue
        try:
            url = format_cell_url(r["database_connection"], database_connection, "[database]")
        except CellURLError as exc:
            LOG.error("%s: %s; its hosts cannot be scheduled", label, exc)
            unusable[r["uuid"]] = f"{label}: {exc}"
            continue
        wanted[r["uuid"]] = {**dict(r), "database_connection": url}
    return WantedCells(wanted, unusable)


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
