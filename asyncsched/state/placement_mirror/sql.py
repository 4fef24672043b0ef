"""Every SQL statement the Placement mirror sends to Placement's database, in one place.

PostgreSQL's forms. A port to another database (MySQL/MariaDB) keeps each statement's
contract, written beside it: the columns, their order and types, and what one row means.
Arrays come back in PostgreSQL's binary form (``array_send`` of a one-dimensional int4 or
int8 array without NULLs), which ``binary.array_values`` reads; an empty set may come back
as an empty array (``'{}'``). Every read of one refresh runs in one read-only REPEATABLE READ
transaction, so all of them see one instant of Placement.

Why allocations are read as id bitmaps: allocation rows are only ever inserted and deleted,
never updated (``_set_allocations`` deletes a consumer's rows, then inserts new ones with new
serial ids; ``DELETE /allocations/{consumer}`` deletes its rows and its ``consumers`` row and
moves no generation). So the set of allocation ids *is* the usage: a row's provider, class
and amount never change. ``ALLOCATION_BITMAPS`` sends that set exactly, 64 ids to a 64-bit
word (one index-only pass over the primary key, no sums, no sort of sums), the reader diffs
it with the previous one and reads only the rows whose ids appeared (``ALLOCATIONS_BY_ID``);
the rows of ids gone it already knows. A row committed late with an id below ones already
seen, or deleted again before a refresh saw it, is no special case: the set is the set.
"""

from __future__ import annotations

# ---- detail rows of the providers that changed (``WHERE ... = ANY($1::int[])`` appended) ----

#: (id, uuid, name, generation, root_provider_id, parent_provider_id)
PROVIDERS = (
    "SELECT id, uuid, name, generation, root_provider_id, parent_provider_id "
    "FROM resource_providers"
)
PROVIDERS_WHERE = " WHERE id = ANY($1::int[])"
#: (provider id, class id, total, reserved, min_unit, max_unit, step_size, allocation_ratio)
INVENTORIES = (
    "SELECT resource_provider_id, resource_class_id, total, reserved, min_unit, max_unit, "
    "step_size, allocation_ratio FROM inventories"
)
INVENTORIES_WHERE = " WHERE resource_provider_id = ANY($1::int[])"
#: (provider id, trait id)
TRAITS = "SELECT resource_provider_id, trait_id FROM resource_provider_traits"
TRAITS_WHERE = " WHERE resource_provider_id = ANY($1::int[])"
#: (provider id, aggregate uuid)
AGGREGATES = (
    "SELECT rpa.resource_provider_id, pa.uuid FROM resource_provider_aggregates rpa "
    "JOIN placement_aggregates pa ON pa.id = rpa.aggregate_id"
)
AGGREGATES_WHERE = " WHERE rpa.resource_provider_id = ANY($1::int[])"

#: (id, name) of every resource class; of every trait
CLASS_NAMES = "SELECT id, name FROM resource_classes"
TRAIT_NAMES = "SELECT id, name FROM traits"

# ---- what moved: read on every refresh --------------------------------------------------------

#: One row, three arrays in ascending id order, one element per provider: the int4 id; an
#: int8 of the generation (NULL as 0) in the high 32 bits and a hash of the name in the low
#: 32 (any stable 32-bit hash, taken unsigned; NULL as the empty name's); an int8 of the
#: root id (NULL as the provider's own id) in the high 32 bits and the parent id (NULL as
#: 0) in the low 32. Placement bumps a provider's generation on every inventory, trait,
#: aggregate and allocation write; root, parent and name move without it (re-parenting a
#: subtree, a rename). Two packed arrays instead of four: PostgreSQL aggregates half as many
#: (a fifth of this statement's CPU at 100,000 providers, docs/scale.md). Sorted once by the
#: subquery (the primary key's order), the aggregates keep that order.
PROVIDER_PRINTS = (
    "SELECT array_send(COALESCE(array_agg(id), '{}')), "
    "array_send(COALESCE(array_agg(g), '{}')), "
    "array_send(COALESCE(array_agg(t), '{}')) "
    "FROM (SELECT id, (COALESCE(generation, 0)::int8 << 32) "
    "| (hashtext(COALESCE(name, ''))::int8 & 4294967295) AS g, "
    "(COALESCE(root_provider_id, id)::int8 << 32) | COALESCE(parent_provider_id, 0) AS t "
    "FROM resource_providers ORDER BY id) AS s"
)

#: One row, two arrays in ascending bucket order: the int4 buckets ``id >> 6`` holding at
#: least one allocation, and per bucket an int8 word with bit ``id & 63`` set for each
#: allocation id present (bit 63 is the sign bit). Exactly the set of allocation ids.
#: The buckets are grouped by hash and only they are sorted (``array_agg(... ORDER BY b)``,
#: one bucket per 64 ids at most): with ``GROUP BY id >> 6 ORDER BY id >> 6`` PostgreSQL
#: does not know the expression follows the primary key's order, estimates one group per
#: row and sorts every id (600,000 at 100,000 providers, spilled to disk past ``work_mem``),
#: which was half of a refresh's time in PostgreSQL (docs/scale.md).
ALLOCATION_BITMAPS = (
    "SELECT array_send(COALESCE(array_agg(b ORDER BY b), '{}')), "
    "array_send(COALESCE(array_agg(m ORDER BY b), '{}')) "
    "FROM (SELECT id >> 6 AS b, bit_or(1::int8 << (id & 63)) AS m FROM allocations "
    "GROUP BY id >> 6) AS s"
)

#: One row, four int4 arrays, one element per allocation row, ascending id: id, provider id,
#: class id, used. Every allocation (the first load) ...
ALLOCATIONS_ALL = (
    "SELECT array_send(COALESCE(array_agg(id), '{}')), "
    "array_send(COALESCE(array_agg(resource_provider_id), '{}')), "
    "array_send(COALESCE(array_agg(resource_class_id), '{}')), "
    "array_send(COALESCE(array_agg(used), '{}')) "
    "FROM (SELECT id, resource_provider_id, resource_class_id, used FROM allocations "
    "ORDER BY id) AS s"
)
#: ... or those of the ids in $1 (the ids that appeared since the last refresh).
ALLOCATIONS_BY_ID = ALLOCATIONS_ALL.replace(
    "FROM allocations ORDER BY id", "FROM allocations WHERE id = ANY($1::int[]) ORDER BY id"
)

# ---- the overcommit guard's fresh read of a few providers (``usage.py``) ---------------------

#: Per provider of $1 (uuids) and class of its inventory: (provider uuid, class name, total,
#: reserved, allocation_ratio, sum of used as int8, 0 when none). A class with allocations
#: always has inventory: Placement refuses to delete it.
PROVIDER_USAGE = (
    "SELECT rp.uuid, rc.name, i.total, i.reserved, i.allocation_ratio, "
    "COALESCE((SELECT SUM(a.used) FROM allocations a WHERE a.resource_provider_id = rp.id "
    "AND a.resource_class_id = i.resource_class_id), 0)::bigint "
    "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE rp.uuid = ANY($1::text[])"
)

#: One provider ($1, its uuid): its inventory as (class name, NULL, total, reserved,
#: allocation_ratio, 0) and each allocation row as (class name, consumer uuid, used, 0, 0,
#: row id). Placement only inserts and deletes allocation rows, so a row's id is its write
#: order: racing overcommit guards rank consumers by it (``scheduling/candidates/guard_usage``).
PROVIDER_HOLDINGS = (
    "SELECT rc.name, NULL::text, i.total, i.reserved, i.allocation_ratio, 0::bigint "
    "FROM resource_providers rp JOIN inventories i ON i.resource_provider_id = rp.id "
    "JOIN resource_classes rc ON rc.id = i.resource_class_id WHERE rp.uuid = $1 "
    "UNION ALL "
    "SELECT rc.name, a.consumer_id, a.used, 0, 0::float, a.id::bigint FROM allocations a "
    "JOIN resource_providers rp ON rp.id = a.resource_provider_id "
    "JOIN resource_classes rc ON rc.id = a.resource_class_id WHERE rp.uuid = $1"
)
