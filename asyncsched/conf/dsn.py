"""The SQLAlchemy URLs of nova.conf, parsed once into a frozen value per URL.

PostgreSQL URLs become asyncpg DSNs (driver suffix dropped, query kept) as before. MySQL and
MariaDB URLs are read as nova's SQLAlchemy + PyMySQL read them (``mysql+pymysql://``,
``mysql://``, ``mysql+mysqldb://``, ``mariadb+pymysql://``): ``charset``, ``unix_socket``,
the SSL options SQLAlchemy folds into PyMySQL's ``ssl`` dict (``ssl_ca``, ``ssl_cert``,
``ssl_key``, ``ssl_capath``, ``ssl_cipher``, ``ssl_check_hostname``) and PyMySQL's own
``ssl_verify_cert`` / ``ssl_verify_identity`` / ``ssl_disabled``, ``connect_timeout``.

Galera: nova (SQLAlchemy) takes one host per URL, normally a load balancer's address. A URL
only asyncsched reads may name several, ``mysql+pymysql://u:p@db1,db2:3307,db3/nova``; they
are tried in order, and a node that goes away sends the next connection to the next one. The
password is never shown: ``str()``/``repr()`` of a :class:`DatabaseURL` mask it.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import ConfigError

_POSTGRES_SCHEMES = {"postgresql", "postgres"}
_MYSQL_SCHEMES = {"mysql", "mariadb"}
_MYSQL_DRIVERS = {"", "pymysql", "mysqldb", "mysqlconnector", "asyncmy", "aiomysql"}
MYSQL_PORT = 3306
_TRUE = {"true", "yes", "on", "y", "t", "1"}
_FALSE = {"false", "no", "off", "n", "f", "0"}
# Query options that change how we connect; other options (oslo.db's plugin=, read_timeout=
# ...) are accepted and left alone, as SQLAlchemy passes them to a driver we do not use.
_SSL_TEXT = ("ssl_ca", "ssl_cert", "ssl_key", "ssl_capath", "ssl_cipher")
_SSL_FLAGS = ("ssl_check_hostname", "ssl_verify_cert", "ssl_verify_identity", "ssl_disabled")

Dialect = Literal["postgresql", "mysql"]


@dataclass(frozen=True, slots=True)
class MysqlTls:
    """PyMySQL's ``ssl`` options as SQLAlchemy hands them over from the URL's query."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    capath: str | None = None
    cipher: str | None = None
    check_hostname: bool | None = None  # None: PyMySQL's default (True when a CA is given)
    verify_cert: bool | None = None

    def context(self) -> ssl.SSLContext:
        """The context PyMySQL would build: the server's certificate checked against the CA
        when one is given (and its name, unless ``ssl_check_hostname=false``)."""
        ctx = ssl.create_default_context(cafile=self.ca, capath=self.capath)
        verify = self.verify_cert if self.verify_cert is not None else bool(self.ca or self.capath)
        ctx.check_hostname = verify and self.check_hostname is not False
        ctx.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
        if self.cert:
            ctx.load_cert_chain(self.cert, self.key)
        if self.cipher:
            ctx.set_ciphers(self.cipher)
        return ctx


@dataclass(frozen=True, slots=True)
class DatabaseURL:
    """One database URL of nova.conf or ``cell_mappings``, parsed."""

    dialect: Dialect
    url: str = field(repr=False)  # as written (holds the password)
    hosts: tuple[tuple[str, int], ...] = ()  # in the order to try; () with a unix socket
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None
    unix_socket: str | None = None
    charset: str = "utf8mb4"
    tls: MysqlTls | None = None
    connect_timeout: float | None = None
    asyncpg_dsn: str = field(default="", repr=False)  # PostgreSQL only

    @property
    def redacted(self) -> str:
        return mask_url_passwords(self.url)

    def __str__(self) -> str:
        return self.redacted


def parse_db_url(url: str) -> DatabaseURL:
    """A PostgreSQL or MySQL/MariaDB URL as SQLAlchemy reads it; ConfigError (password
    masked) for anything else or a malformed one."""
    text = url.strip()
    parts = urlsplit(text)
    scheme, _, driver = parts.scheme.lower().partition("+")
    if scheme in _POSTGRES_SCHEMES:
        return DatabaseURL("postgresql", text, asyncpg_dsn=to_asyncpg_dsn(text))
    if scheme in _MYSQL_SCHEMES:
        if driver not in _MYSQL_DRIVERS:
            raise ConfigError(f"unknown MySQL driver {driver!r} in {mask_url_passwords(text)!r}")
        return _mysql(text)
    raise ConfigError(
        f"not a PostgreSQL or MySQL URL: {mask_url_passwords(text)!r}"
        " (expected postgresql://user@host/db or mysql+pymysql://user:pass@host/db)"
    )


def to_asyncpg_dsn(url: str) -> str:
    """``postgresql+psycopg2://u:p@h/db?x=y`` -> ``postgresql://u:p@h/db?x=y``."""
    parts = urlsplit(url.strip())
    dialect = parts.scheme.split("+", 1)[0].lower()
    if dialect not in _POSTGRES_SCHEMES or (not parts.netloc and not parts.query):
        raise ConfigError(
            f"not a PostgreSQL URL: {mask_url_passwords(url)!r} (expected postgresql://user@host/db)"
        )
    try:
        parts.port  # noqa: B018  (urlsplit checks the port only when asked)
    except ValueError:
        raise ConfigError("its port is not a number") from None
    return urlunsplit(("postgresql", parts.netloc, parts.path, parts.query, ""))


def normalize_db_url(url: str) -> str:
    """What the config loader keeps: PostgreSQL as an asyncpg DSN (as before), MySQL as
    written once it parses. Raises ConfigError."""
    parsed = parse_db_url(url)
    return parsed.asyncpg_dsn if parsed.dialect == "postgresql" else parsed.url


def _mysql(text: str) -> DatabaseURL:
    parts = urlsplit(text)
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    user, has_pw, password = userinfo.partition(":")
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    hosts = tuple(_host(h) for h in hostlist.split(",") if h) if hostlist else ()
    socket = query.get("unix_socket") or None
    if not hosts and socket is None:
        hosts = (("localhost", MYSQL_PORT),)  # PyMySQL's default
    database = unquote(parts.path.lstrip("/")) or None
    if database is None:
        raise ConfigError(f"no database name in {mask_url_passwords(text)!r}")
    return DatabaseURL(
        "mysql",
        text,
        hosts=hosts,
        user=unquote(user) or None,
        password=unquote(password) if has_pw else None,
        database=database,
        unix_socket=socket,
        charset=query.get("charset") or "utf8mb4",
        tls=_tls(query),
        connect_timeout=_number(query, "connect_timeout"),
    )


def _host(text: str) -> tuple[str, int]:
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = text.partition(":")
    if not host:
        raise ConfigError("an empty host in the host list")
    if port and not port.isdigit():
        raise ConfigError("its port is not a number")
    number = int(port) if port else MYSQL_PORT
    if not 0 < number < 65536:
        raise ConfigError(f"port {number} out of range")
    return host, number


def _flag(query: dict[str, str], key: str) -> bool | None:
    value = query.get(key)
    if value is None:
        return None
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise ConfigError(f"{key}={value!r} is not true or false")


def _number(query: dict[str, str], key: str) -> float | None:
    value = query.get(key)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{key}={value!r} is not a number") from None


def _tls(query: dict[str, str]) -> MysqlTls | None:
    flags = {k: _flag(query, k) for k in _SSL_FLAGS}
    text = {k: query.get(k) or None for k in _SSL_TEXT}
    if flags["ssl_disabled"] or not (any(text.values()) or any(f for f in flags.values())):
        return None
    verify = flags["ssl_verify_cert"]
    if flags["ssl_verify_identity"]:
        verify = True
    return MysqlTls(
        ca=text["ssl_ca"],
        cert=text["ssl_cert"],
        key=text["ssl_key"],
        capath=text["ssl_capath"],
        cipher=text["ssl_cipher"],
        check_hostname=True if flags["ssl_verify_identity"] else flags["ssl_check_hostname"],
        verify_cert=verify,
    )
