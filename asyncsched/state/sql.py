"""The SQL the host-state cache sends to nova's API and cell databases, and its page sizes.

Why one module: every query is read here in one place (columns, watermarks, keyset pages),
so a schema question is answered without reading the refresh logic.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from asyncsched.state.dialect import MYSQL as MYSQL_SYNTAX
from asyncsched.state.dialect import POSTGRES as PG_SYNTAX
from asyncsched.state.dialect import Syntax

CELL0_UUID = "00000000-0000-0000-0000-000000000000"
# Rows changed this long before the previous pass's start are read again: covers clock skew
# between computes and the DB and transactions that committed late. Re-reading is idempotent.
WATERMARK_OVERLAP = timedelta(seconds=15)

_NODE_COLS = (
    "id, uuid, host, hypervisor_hostname, vcpus, vcpus_used, memory_mb, free_ram_mb, local_gb,"
    " local_gb_used, free_disk_gb, disk_available_least, hypervisor_type, hypervisor_version,"
    " host_ip, cpu_info, supported_instances, numa_topology, pci_stats, metrics, stats,"
    " cpu_allocation_ratio, ram_allocation_ratio, disk_allocation_ratio, created_at,"
    " updated_at, deleted"
)
_SVC_COLS = (
    'id, uuid, host, "binary", disabled, disabled_reason, forced_down, last_seen_up,'
    " created_at, updated_at, version, deleted, deleted_at"
)
# What a heartbeat does not change: all of a services row but last_seen_up, updated_at (and
# report_count, not read), folded by the database into one md5. A changed row whose stamps
# moved but whose signature did not is a heartbeat: only its beat is read (``readers.py``).
_SIG_COLS = (
    *("host", '"binary"', "disabled", "disabled_reason", "forced_down"),
    *("version", "deleted", "uuid", "created_at", "deleted_at"),
)
_CHANGED = "(updated_at >= $3 OR created_at >= $3 OR deleted_at >= $3)"
_PAGE = "AND id > $1 ORDER BY id LIMIT $2"  # keyset pages: no huge result decoded at once
_COMPUTE = "\"binary\" = 'nova-compute'"

# The per-request read looks back this far before the previous read's instant: a row whose
# updated_at (the writer's clock, whole seconds on MySQL) is a little older than its commit.
# Rows older still (a writer's clock far behind) are left to the refresh's 15 s overlap.
FRESH_OVERLAP = timedelta(seconds=2)
NODE_PAGE = 500
CHUNK = 256  # rows parsed / hosts applied between yields to the event loop
INSTANCE_PAGE = 20000
SYSMETA_PAGE = 5000  # instances per page
SYSMETA_BATCH = 1000  # instance uuids per list query

# Instances' image properties (ImagePropertiesWeigher), read only while it can matter. nova
# hard-deletes system-metadata keys an update drops, so an instance is re-read whole whenever
# its instances row or any of its image_* rows changed; the full resync catches the rest.
# One row per instance, its image_* rows folded by the database into one key-ordered string
# (key US value RS ...): ten times fewer rows to decode, and identical images give identical
# strings, parsed once. Keyset pages walk nova's instance_uuid index.
_IMAGE_KEYS = "\"key\" LIKE 'image\\_%' AND value IS NOT NULL AND deleted = 0"


@dataclass(frozen=True, slots=True)
class Queries:
    """Every query the host-state cache (and the guard's usage read) sends, in one dialect."""

    now: str
    nodes_all: str
    nodes_changed: str
    services_all: str
    # The overlap re-reads every heartbeat's row many times (10,000 computes beat every
    # 10 s): the stamps of the changed rows ($1: the watermark less the overlap) are read
    # first, as one text a row (``_stamp``) and whether one is not older than $2 (the
    # previous read's instant in whole seconds); rows are read only where a stamp is new or
    # recent.
    service_stamps_changed: str
    # The per-request read (``fresh``): one round trip giving the DB's clock and the stamps of
    # the rows changed since $1 that can change a verdict: disabled or forced down other than
    # the cache holds them ($2, $3: the ids it holds disabled, forced down), deleted or new
    # rows, and any change of the ids in $4 (held silent: their heartbeat matters). A
    # heartbeat of a host held up, disabled or forced down changes no verdict and is left
    # out. Always one row at least (the clock): a NULL id means nothing changed. Every row
    # but the clock's: (now, id, stamp), each one changed since $1.
    services_fresh: str
    # The refresh pass between two sweeps (``refresher``): ``service_stamps_changed`` of only
    # the rows that can change a verdict, the rule of ``services_fresh`` ($3, $4, $5: the ids
    # held disabled, forced down, silent). Every beat is read by the sweep.
    service_stamps_verdict: str
    services_by_id: str
    # The rows of these ids as a heartbeat leaves them: id, the beat (last_seen_up and
    # updated_at, aware on PostgreSQL), the stamp (``_stamp``), the signature of the rest
    # (``_SIG_COLS``), compared with the one applied.
    services_beats: str
    instances_all: str
    instances_changed: str
    instances_of_host: str
    sysmeta_all: str
    sysmeta_changed: str
    sysmeta_of: str
    api_fingerprint: str
    # Placement: per provider and resource class of its inventory, Placement's capacity
    # inputs and the sum allocated (the overcommit guard's read).
    provider_usage: str


def build(s: Syntax) -> Queries:
    """The queries written once, in dialect ``s``."""
    now = f"SELECT {s.now} AS now"
    sig = _signature(s)
    stamp = _stamp(s)
    kv = f"{s.fold_kv(chr(34) + 'key' + chr(34), 'value')} AS kv"
    stamps_changed = (
        f"SELECT id, {stamp},"
        " coalesce(updated_at >= $2 OR created_at >= $2 OR deleted_at >= $2, false)"
        f" AS recent FROM services WHERE {_COMPUTE}"
        " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
    )
    return Queries(
        now=now,
        nodes_all=f"SELECT {_NODE_COLS} FROM compute_nodes WHERE deleted = 0 {_PAGE}",
        nodes_changed=f"SELECT {_NODE_COLS} FROM compute_nodes WHERE {_CHANGED} {_PAGE}",
        services_all=(
            f"SELECT {_SVC_COLS}, {sig}, {stamp} FROM services WHERE {_COMPUTE} AND deleted = 0"
        ),
        service_stamps_changed=stamps_changed,
        services_fresh=(
            f"SELECT n.now, s.id, {_stamp(s, 's.')}"
            f" FROM ({now}) n"
            f" LEFT JOIN services s ON s.{_COMPUTE}"
            " AND (s.updated_at >= $1 OR s.created_at >= $1 OR s.deleted_at >= $1)"
            f" AND {_can_change_verdict(s, 's.', 1, 2)}"
        ),
        service_stamps_verdict=f"{stamps_changed} AND {_can_change_verdict(s, '', 1, 3)}",
        services_by_id=(
            f"SELECT {_SVC_COLS}, {sig}, {stamp} FROM services WHERE {s.where_in('id', 1, 'int')}"
        ),
        services_beats=(
            f"SELECT id, {s.utc('last_seen_up')} AS beat, {s.utc('updated_at')} AS beat_at,"
            f" {stamp}, {sig}"
            f" FROM services WHERE {s.where_in('id', 1, 'int')}"
        ),
        instances_all=(
            f"SELECT id, uuid, host FROM instances WHERE deleted = 0 AND host IS NOT NULL {_PAGE}"
        ),
        instances_changed=(
            f"SELECT id, uuid, host, deleted FROM instances WHERE {_CHANGED} {_PAGE}"
        ),
        instances_of_host="SELECT uuid FROM instances WHERE host = $1 AND deleted = 0",
        sysmeta_all=(
            f"SELECT instance_uuid, {kv} FROM instance_system_metadata"
            f" WHERE {_IMAGE_KEYS} AND instance_uuid > $1"
            " GROUP BY instance_uuid ORDER BY instance_uuid LIMIT $2"
        ),
        sysmeta_changed=(
            "SELECT DISTINCT instance_uuid FROM instance_system_metadata"
            " WHERE \"key\" LIKE 'image\\_%'"
            " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
        ),
        sysmeta_of=(
            f"SELECT instance_uuid, {kv} FROM instance_system_metadata WHERE {_IMAGE_KEYS}"
            f" AND {s.where_in('instance_uuid', 1, 'varchar')} GROUP BY instance_uuid"
        ),
        api_fingerprint=_fingerprint(s),
        provider_usage=(
            "SELECT rp.uuid, rc.name, i.total, i.reserved, i.allocation_ratio, "
            "CAST(COALESCE((SELECT SUM(a.used) FROM allocations a"
            " WHERE a.resource_provider_id = rp.id"
            f" AND a.resource_class_id = i.resource_class_id), 0) AS {s.bigint}) "
            "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
            "JOIN resource_classes rc ON rc.id = i.resource_class_id"
            f" WHERE {s.where_in('rp.uuid', 1, 'text')}"
        ),
    )


def _can_change_verdict(s: Syntax, prefix: str, since: int, held: int) -> str:
    """The rule, written once, of which changed services rows can change a verdict: disabled
    or forced down other than the cache holds them (parameters ``held``, ``held + 1``: the
    ids held disabled, forced down), deleted, new since parameter ``since``, or held silent
    (parameter ``held + 2``: their heartbeat matters). A heartbeat of a host held up,
    disabled or forced down changes no verdict."""
    sid = f"{prefix}id"
    return (
        f"(coalesce({prefix}disabled, false) <> {s.member(sid, held, 'int')}"
        f" OR coalesce({prefix}forced_down, false) <> {s.member(sid, held + 1, 'int')}"
        f" OR {prefix}deleted <> 0 OR {prefix}created_at >= ${since}"
        f" OR {s.member(sid, held + 2, 'int')})"
    )


def _signature(s: Syntax) -> str:
    """md5 of the ``_SIG_COLS`` of a services row (a NULL is its own value, not skipped)."""
    parts = ", ".join(f"coalesce(CAST({c} AS {s.text}), '~')" for c in _SIG_COLS)
    return f"md5(concat_ws('|', {parts})) AS sig"


def _stamp(s: Syntax, prefix: str = "") -> str:
    """A services row's three stamps as one text, written by the database (a NULL is its
    own value): what ``index.service_stamps`` keeps and compares, one short string a row
    to decode instead of three timestamps."""
    cols = (f"{prefix}{c}" for c in ("updated_at", "created_at", "deleted_at"))
    parts = ", ".join(f"coalesce(CAST({c} AS {s.text}), '~')" for c in cols)
    return f"concat_ws('|', {parts}) AS stamp"


def _fingerprint(s: Syntax) -> str:
    """Per API table: row count, newest stamp and (where rows come and go) the sum of ids;
    and the DB's clock: a part whose newest stamp is recent is read again (``state/api.py``)."""

    def text(expr: str) -> str:
        return f"coalesce(CAST({expr} AS {s.text}), '')"

    stamp = text("max(greatest(created_at, coalesce(updated_at, created_at)))")
    parts = {"cells": "cell_mappings", "hosts": "host_mappings", "aggs": "aggregates"}
    parts |= {"agg_hosts": "aggregate_hosts", "agg_meta": "aggregate_metadata"}
    cols = [f"{s.now} AS now"]
    for name, table in parts.items():
        ids = "" if name == "cells" else f", '/', {text('sum(id)')}"
        row = f"concat({text('count(*)')}, '/', {stamp}{ids})"
        cols.append(f"(SELECT {row} FROM {table}) AS {name}")
    return "SELECT " + ", ".join(cols)


POSTGRES = build(PG_SYNTAX)
MYSQL = build(MYSQL_SYNTAX)
QUERIES = {"postgresql": POSTGRES, "mysql": MYSQL}
# Names the benchmarks and tests use (PostgreSQL).
SQL_SERVICES_ALL = POSTGRES.services_all
SQL_SERVICES_BY_ID = POSTGRES.services_by_id

SQL_CELLS = "SELECT id, uuid, name, database_connection, disabled FROM cell_mappings ORDER BY id"
SQL_HOST_MAPPINGS = (
    "SELECT h.host, c.uuid FROM host_mappings h JOIN cell_mappings c ON c.id = h.cell_id"
)
SQL_AGGREGATES = "SELECT id, uuid, name FROM aggregates ORDER BY id"
SQL_AGGREGATE_HOSTS = "SELECT aggregate_id, host FROM aggregate_hosts ORDER BY id"
SQL_AGGREGATE_METADATA = 'SELECT aggregate_id, "key", value FROM aggregate_metadata ORDER BY id'
