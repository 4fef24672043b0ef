"""Database URLs as nova.conf and cell_mappings write them: one frozen value per URL (#25)."""

from __future__ import annotations

import ssl
from dataclasses import FrozenInstanceError

import pytest

from asyncsched.conf.dsn import DatabaseURL, parse_db_url
from asyncsched.exceptions import ConfigError


@pytest.mark.parametrize(
    "url",
    [
        "mysql+pymysql://nova:S3cret@db/nova?charset=utf8",  # kolla-ansible, OSA
        "mysql://nova:S3cret@db/nova",
        "mysql+mysqldb://nova:S3cret@db:3306/nova",
        "mariadb+pymysql://nova:S3cret@db/nova",
    ],
)
def test_mysql_urls_of_nova_conf(url: str) -> None:
    u = parse_db_url(url)
    assert u.dialect == "mysql"
    assert u.hosts == (("db", 3306),)
    assert (u.user, u.password, u.database) == ("nova", "S3cret", "nova")
    assert "S3cret" not in repr(u) and "S3cret" not in str(u)
    with pytest.raises(FrozenInstanceError):
        u.database = "other"  # type: ignore[misc]


def test_charset_socket_and_percent_encoded_password() -> None:
    u = parse_db_url("mysql+pymysql://nova:p%40ss%3Aw@/nova?unix_socket=/run/mysqld/mysqld.sock")
    assert u.hosts == () and u.unix_socket == "/run/mysqld/mysqld.sock"
    assert u.password == "p@ss:w" and u.charset == "utf8mb4"
    assert parse_db_url("mysql://n@h/nova?charset=utf8").charset == "utf8"


def test_galera_host_list_in_order_with_ports() -> None:
    u = parse_db_url("mysql+pymysql://nova:pw@db1,db2:3307,[fd00::3]/nova")
    assert u.hosts == (("db1", 3306), ("db2", 3307), ("fd00::3", 3306))


def test_ssl_options_as_sqlalchemy_hands_them_to_pymysql(tmp_path: object) -> None:
    u = parse_db_url("mysql+pymysql://n:p@db/nova?ssl_check_hostname=false&ssl_cipher=AES256-SHA")
    assert u.tls is not None and u.tls.check_hostname is False
    assert u.tls.cipher == "AES256-SHA"
    u2 = parse_db_url("mysql+pymysql://n:p@db/nova?ssl_verify_cert=true&ssl_verify_identity=1")
    assert u2.tls is not None and u2.tls.verify_cert and u2.tls.check_hostname
    assert parse_db_url("mysql://n:p@db/nova?ssl_disabled=true&ssl_ca=/x").tls is None
    assert parse_db_url("mysql://n:p@db/nova").tls is None


def test_tls_context_follows_pymysql_defaults() -> None:
    ctx = parse_db_url("mysql://n:p@db/nova?ssl_verify_cert=false&ssl_cipher=AES256-SHA")
    assert ctx.tls is not None
    c = ctx.tls.context()
    assert c.verify_mode == ssl.CERT_NONE and not c.check_hostname


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("mysql+pymysql://nova:S3cret@db:33o6/nova", "port is not a number"),
        ("mysql+pymysql://nova:S3cret@db:99999/nova", "out of range"),
        ("mysql+pymysql://nova:S3cret@db/", "no database name"),
        ("mysql+oursql://nova:S3cret@db/nova", "unknown MySQL driver"),
        ("mysql://nova:S3cret@db/nova?ssl_check_hostname=maybe", "true or false"),
        ("mysql://nova:S3cret@db/nova?connect_timeout=soon", "not a number"),
        ("mysql://nova:S3cret@db1,,:3306/nova", "empty host"),
        ("oracle://nova:S3cret@db/nova", "not a PostgreSQL or MySQL URL"),
        ("postgresql://nova:S3cret@db:x/nova", "port is not a number"),
    ],
)
def test_bad_urls_say_why_and_never_the_password(url: str, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_db_url(url)
    assert reason in str(err.value) and "S3cret" not in str(err.value)


def test_postgresql_keeps_its_asyncpg_dsn() -> None:
    u = parse_db_url("postgresql+psycopg2://nova:pw@db:5432/nova?sslmode=prefer")
    assert isinstance(u, DatabaseURL) and u.dialect == "postgresql"
    assert u.asyncpg_dsn == "postgresql://nova:pw@db:5432/nova?sslmode=prefer"
