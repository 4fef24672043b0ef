"""A read-only role for the Placement mirror, as an operator would grant it, on PostgreSQL or
MariaDB."""

from __future__ import annotations

from dataclasses import dataclass

from tests.support import mysql
from tests.support.nova_db import Backend, url_for
from tests.support.placement_server import pg_exec


def _my_exec(sql: str) -> None:
    with mysql.admin() as cur:
        cur.execute(sql)


@dataclass(frozen=True, slots=True)
class ReadOnlyRole:
    """A login of its own with ``SELECT`` on Placement's tables: all the mirror needs."""

    name: str
    db: str
    backend: Backend = "postgresql"

    @property
    def url(self) -> str:
        return url_for(self.db, user=self.name, backend=self.backend)

    @property
    def _account(self) -> str:
        return f"'{self.name}'@'127.0.0.1'"

    def create(self) -> None:
        if self.backend == "mysql":
            _my_exec(f"CREATE USER {self._account} IDENTIFIED BY ''")
            _my_exec(f"GRANT SELECT ON {mysql.quote(self.db)}.* TO {self._account}")
            return
        pg_exec(f'CREATE ROLE "{self.name}" LOGIN')
        pg_exec(
            f'GRANT CONNECT ON DATABASE "{self.db}" TO "{self.name}"; '
            f'GRANT USAGE ON SCHEMA public TO "{self.name}"; '
            f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{self.name}"',
            db=self.db,
        )

    def block(self) -> None:
        """The mirror's database access is gone: no new logins, its sessions ended."""
        if self.backend == "mysql":
            _my_exec(f"ALTER USER {self._account} ACCOUNT LOCK")
            with mysql.admin() as cur:
                cur.execute(
                    "SELECT id FROM information_schema.processlist WHERE user = %s", (self.name,)
                )
                for row in cur.fetchall():
                    cur.execute(f"KILL {int(row['id'])}")
            return
        pg_exec(f'ALTER ROLE "{self.name}" NOLOGIN')
        pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'"
        )

    def unblock(self) -> None:
        if self.backend == "mysql":
            _my_exec(f"ALTER USER {self._account} ACCOUNT UNLOCK")
            return
        pg_exec(f'ALTER ROLE "{self.name}" LOGIN')

    def drop(self) -> None:
        self.unblock()
        if self.backend == "mysql":
            self.block()  # its sessions ended
            _my_exec(f"DROP USER IF EXISTS {self._account}")
            return
        pg_exec(
            f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{self.name}'"
        )
        pg_exec(f'DROP OWNED BY "{self.name}"', db=self.db)
        pg_exec(f'DROP ROLE IF EXISTS "{self.name}"')
