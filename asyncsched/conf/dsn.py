"""Turn the SQLAlchemy URLs of nova.conf into asyncpg DSNs."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import ConfigError

_POSTGRES_SCHEMES = {"postgresql", "postgres"}


def to_asyncpg_dsn(url: str) -> str:
    """``postgresql+psycopg2://u:p@h/db?x=y`` -> ``postgresql://u:p@h/db?x=y``.

    Driver suffixes are dropped. MySQL and any other database are refused with a clear message,
    because asyncsched reads the nova databases with asyncpg only.
    """
    parts = urlsplit(url.strip())
    dialect = parts.scheme.split("+", 1)[0].lower()
    if dialect in ("mysql", "mariadb"):
        raise ConfigError(
            f"{dialect} database URLs are not supported: asyncsched requires the nova "
            "databases on PostgreSQL (postgresql://...)"
        )
    if dialect not in _POSTGRES_SCHEMES or (not parts.netloc and not parts.query):
        raise ConfigError(
            f"not a PostgreSQL URL: {mask_url_passwords(url)!r} (expected postgresql://user@host/db)"
        )
    try:
        parts.port  # noqa: B018  (urlsplit checks the port only when asked)
    except ValueError:
        raise ConfigError("its port is not a number") from None
    return urlunsplit(("postgresql", parts.netloc, parts.path, parts.query, ""))
