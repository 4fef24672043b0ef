"""A read-only PostgreSQL role for the Placement mirror, as an operator would grant it."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support.placement_server import PG_HOST, pg_exec


@dataclass(frozen=True, slots=True)
class ReadOnlyRole:
    """A login role of its own with ``SELECT`` on Placement's tables: all the mirror needs."""

    name: str
    db: str

    @property
    def url(self) -> str:
        return f"postgresql+psycopg2://{self.name}@{PG_HOST}/{self.db}"

    def block(self) -> None:
        """The mirror's database access is gone: no new logins, its sessions ended."""
        pg_exec(f'ALTER ROLE "{self.name}" NOLOGIN')
        pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'"
        )

    def unblock(self) -> None:
        pg_exec(f'ALTER ROLE "{self.name}" LOGIN')
