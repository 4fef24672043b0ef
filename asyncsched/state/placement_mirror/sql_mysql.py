"""The mirror's statements on MySQL/MariaDB: each keeps the contract ``sql.py`` writes beside
its PostgreSQL form (the columns, their order and meaning, one instant per refresh).

What differs, and only here: a list parameter is ``IN $1`` (the driver expands a list); an
"array" answer is one row: ``COUNT(*)`` and one ``GROUP_CONCAT`` text of every element's
columns in turn (decimal numbers joined by ``,``, elements in the order the contract says, one
sort; NULL for none), read whole by numpy and cut into the arrays (``connection.py``); the
count makes sure a text cut short can never pass for a smaller set; the name hash is
``CRC32`` (the contract asks for any stable 32-bit hash); the bitmap words are ``BIT_OR`` of
unsigned 64-bit values, read as the same bits signed. The first load's every-allocation read
comes back as rows instead: one text of a million allocations would pass MariaDB's
``max_allowed_packet`` (16 MB by default), which a session cannot raise. The session raises
``group_concat_max_len`` to its maximum (``connection.py``).
"""

from __future__ import annotations

from asyncsched.state.placement_mirror import sql

PROVIDERS = sql.PROVIDERS
PROVIDERS_WHERE = " WHERE id IN $1"
INVENTORIES = sql.INVENTORIES
INVENTORIES_WHERE = " WHERE resource_provider_id IN $1"
TRAITS = sql.TRAITS
TRAITS_WHERE = " WHERE resource_provider_id IN $1"
AGGREGATES = sql.AGGREGATES
AGGREGATES_WHERE = " WHERE rpa.resource_provider_id IN $1"
CLASS_NAMES = sql.CLASS_NAMES
TRAIT_NAMES = sql.TRAIT_NAMES

PROVIDER_PRINTS = (
    "SELECT COUNT(*), GROUP_CONCAT(CONCAT_WS(',', id, "
    "(COALESCE(generation, 0) << 32) | CRC32(COALESCE(name, '')), "
    "(COALESCE(root_provider_id, id) << 32) | COALESCE(parent_provider_id, 0)) ORDER BY id) "
    "FROM resource_providers"
)

ALLOCATION_BITMAPS = (
    "SELECT COUNT(*), GROUP_CONCAT(CONCAT_WS(',', b, m) ORDER BY b) "
    "FROM (SELECT id >> 6 AS b, BIT_OR(1 << (id & 63)) AS m FROM allocations "
    "GROUP BY id >> 6) AS s"
)

#: rows, ascending id (see the module's note): id, provider id, class id, used
ALLOCATIONS_ALL = (
    "SELECT id, resource_provider_id, resource_class_id, used FROM allocations ORDER BY id"
)
ALLOCATIONS_BY_ID = (
    "SELECT COUNT(*), GROUP_CONCAT(CONCAT_WS(',', id, resource_provider_id, "
    "resource_class_id, used) ORDER BY id) FROM allocations WHERE id IN $1"
)

PROVIDER_USAGE = (
    "SELECT rp.uuid, rc.name, i.total, i.reserved, i.allocation_ratio, "
    "CAST(COALESCE((SELECT SUM(a.used) FROM allocations a WHERE a.resource_provider_id = rp.id "
    "AND a.resource_class_id = i.resource_class_id), 0) AS SIGNED) "
    "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE rp.uuid IN $1"
)

PROVIDER_HOLDINGS = (
    "SELECT rc.name, CAST(NULL AS CHAR), i.total, i.reserved, i.allocation_ratio, 0 "
    "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE rp.uuid = $1 "
    "UNION ALL "
    "SELECT rc.name, a.consumer_id, a.used, 0, 0.0, a.id FROM allocations a "
    "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
    "JOIN resource_classes rc ON rc.id = a.resource_class_id WHERE rp.uuid = $1"
)
