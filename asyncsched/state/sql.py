"""The SQL the host-state cache sends to nova's API and cell databases, and its page sizes.

Why one module: every query is read here in one place (columns, watermarks, keyset pages),
so a schema question is answered without reading the refresh logic.
"""

from __future__ import annotations

from datetime import timedelta

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
_CHANGED = "(updated_at >= $3 OR created_at >= $3 OR deleted_at >= $3)"
_PAGE = "AND id > $1 ORDER BY id LIMIT $2"  # keyset pages: no huge result decoded at once

SQL_NOW = "SELECT (now() AT TIME ZONE 'utc') AS now"
SQL_NODES_ALL = f"SELECT {_NODE_COLS} FROM compute_nodes WHERE deleted = 0 {_PAGE}"
SQL_NODES_CHANGED = f"SELECT {_NODE_COLS} FROM compute_nodes WHERE {_CHANGED} {_PAGE}"
SQL_SERVICES_ALL = (
    f"SELECT {_SVC_COLS} FROM services WHERE \"binary\" = 'nova-compute' AND deleted = 0"
)
# The overlap re-reads every heartbeat's row many times (10,000 computes beat every 10 s): the
# stamps of the changed rows are read first, and whole rows only where a stamp is new.
SQL_SERVICE_STAMPS_CHANGED = (
    "SELECT id, updated_at, created_at, deleted_at FROM services"
    " WHERE \"binary\" = 'nova-compute'"
    " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
)
# The per-request read (``fresh``): one round trip giving the DB's clock and the stamps of the
# rows changed since $1 that can change a verdict: disabled or forced down other than the cache
# holds them ($2, $3: the ids it holds disabled, forced down), deleted or new rows, and any
# change of the ids in $4 (held silent: their heartbeat matters). A heartbeat of a host held
# up, disabled or forced down changes no verdict and is left out here.
# Always one row at least (the clock): a NULL id means nothing changed.
SQL_SERVICES_FRESH = (
    "SELECT n.now, s.id, s.updated_at, s.created_at, s.deleted_at"
    " FROM (SELECT (now() AT TIME ZONE 'utc') AS now) n"
    " LEFT JOIN services s ON s.\"binary\" = 'nova-compute'"
    " AND (s.updated_at >= $1 OR s.created_at >= $1 OR s.deleted_at >= $1)"
    " AND (coalesce(s.disabled, false) <> (s.id = ANY($2::int[]))"
    " OR coalesce(s.forced_down, false) <> (s.id = ANY($3::int[]))"
    " OR s.deleted <> 0 OR s.created_at >= $1 OR s.id = ANY($4::int[]))"
)
# The per-request read looks back this far before the previous read's instant: a row whose
# updated_at (the writer's clock, whole seconds on MySQL) is a little older than its commit.
# Rows older still (a writer's clock far behind) are left to the refresh's 15 s overlap.
FRESH_OVERLAP = timedelta(seconds=2)
SQL_SERVICES_BY_ID = f"SELECT {_SVC_COLS} FROM services WHERE id = ANY($1::int[])"
SQL_INSTANCES_ALL = (
    f"SELECT id, uuid, host FROM instances WHERE deleted = 0 AND host IS NOT NULL {_PAGE}"
)
SQL_INSTANCES_CHANGED = f"SELECT id, uuid, host, deleted FROM instances WHERE {_CHANGED} {_PAGE}"
NODE_PAGE = 500
CHUNK = 256  # rows parsed / hosts applied between yields to the event loop
INSTANCE_PAGE = 20000
SQL_INSTANCES_OF_HOST = "SELECT uuid FROM instances WHERE host = $1 AND deleted = 0"

# Instances' image properties (ImagePropertiesWeigher), read only while it can matter. nova
# hard-deletes system-metadata keys an update drops, so an instance is re-read whole whenever
# its instances row or any of its image_* rows changed; the full resync catches the rest.
# One row per instance, its image_* rows folded by PostgreSQL into one key-ordered string
# (key US value RS ...): ten times fewer rows to decode, and identical images give identical
# strings, parsed once. Keyset pages walk nova's instance_uuid index.
_IMAGE_KEYS = "key LIKE 'image\\_%' AND value IS NOT NULL AND deleted = 0"
_KV = "string_agg(key || chr(31) || value, chr(30) ORDER BY key) AS kv"
SQL_SYSMETA_ALL = (
    f"SELECT instance_uuid, {_KV} FROM instance_system_metadata"
    f" WHERE {_IMAGE_KEYS} AND instance_uuid > $1"
    " GROUP BY instance_uuid ORDER BY instance_uuid LIMIT $2"
)
SQL_SYSMETA_CHANGED = (
    "SELECT DISTINCT instance_uuid FROM instance_system_metadata WHERE key LIKE 'image\\_%'"
    " AND (updated_at >= $1 OR created_at >= $1 OR deleted_at >= $1)"
)
SQL_SYSMETA_OF = (
    f"SELECT instance_uuid, {_KV} FROM instance_system_metadata"
    f" WHERE {_IMAGE_KEYS} AND instance_uuid = ANY($1::varchar[]) GROUP BY instance_uuid"
)
SYSMETA_PAGE = 5000  # instances per page
SYSMETA_BATCH = 1000  # instance uuids per ANY() query

SQL_API_FINGERPRINT = """
SELECT
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    FROM cell_mappings) AS cells,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM host_mappings) AS hosts,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM aggregates) AS aggs,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM aggregate_hosts) AS agg_hosts,
 (SELECT count(*)::text || '/' || coalesce(max(greatest(created_at, updated_at))::text, '')
    || '/' || coalesce(sum(id)::text, '') FROM aggregate_metadata) AS agg_meta
"""
SQL_CELLS = "SELECT id, uuid, name, database_connection, disabled FROM cell_mappings ORDER BY id"
SQL_HOST_MAPPINGS = (
    "SELECT h.host, c.uuid FROM host_mappings h JOIN cell_mappings c ON c.id = h.cell_id"
)
SQL_AGGREGATES = "SELECT id, uuid, name FROM aggregates ORDER BY id"
SQL_AGGREGATE_HOSTS = "SELECT aggregate_id, host FROM aggregate_hosts ORDER BY id"
SQL_AGGREGATE_METADATA = "SELECT aggregate_id, key, value FROM aggregate_metadata ORDER BY id"
