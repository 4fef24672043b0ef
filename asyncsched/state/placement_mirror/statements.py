"""The mirror's statements per dialect: ``sql.py`` (PostgreSQL) and ``sql_mysql.py`` (MySQL and
MariaDB) hold the text, each statement's contract written beside its PostgreSQL form."""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

from asyncsched.state.placement_mirror import sql, sql_mysql


@dataclass(frozen=True, slots=True)
class MirrorSQL:
    """One dialect's statements (``sql.py`` names each one's contract)."""

    dialect: str
    providers: str
    providers_where: str
    inventories: str
    inventories_where: str
    traits: str
    traits_where: str
    aggregates: str
    aggregates_where: str
    class_names: str
    trait_names: str
    provider_prints: str
    allocation_bitmaps: str
    allocations_all: str
    allocations_by_id: str
    provider_usage: str
    provider_holdings: str

    @classmethod
    def of(cls, dialect: str, m: ModuleType) -> MirrorSQL:
        return cls(
            dialect,
            m.PROVIDERS,
            m.PROVIDERS_WHERE,
            m.INVENTORIES,
            m.INVENTORIES_WHERE,
            m.TRAITS,
            m.TRAITS_WHERE,
            m.AGGREGATES,
            m.AGGREGATES_WHERE,
            m.CLASS_NAMES,
            m.TRAIT_NAMES,
            m.PROVIDER_PRINTS,
            m.ALLOCATION_BITMAPS,
            m.ALLOCATIONS_ALL,
            m.ALLOCATIONS_BY_ID,
            m.PROVIDER_USAGE,
            m.PROVIDER_HOLDINGS,
        )


POSTGRESQL = MirrorSQL.of("postgresql", sql)
MYSQL = MirrorSQL.of("mysql", sql_mysql)
BY_DIALECT = {"postgresql": POSTGRESQL, "mysql": MYSQL}
