"""Secrets planted in the config never reach ``check-config``'s output or an error message.

Issue #21 item 6: check-config printed DSN query passwords and a transport_url password that
holds a quote. The health file and ``/v1/status`` are tested against the real daemon in
tests/integration/admin/test_admin_secrets.py.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from asyncsched.cli import EX_CONFIG, main
from asyncsched.conf.dsn import to_asyncpg_dsn
from asyncsched.conf.transport_url import parse_transport_url
from asyncsched.exceptions import ConfigError
from asyncsched.logs import OneLineFormatter

SECRETS = ("S3cretA", "S3cretB", "S3cretC", "S3cretD", "S3cretE", "S3cretF")
CONF = f"""
[DEFAULT]
transport_url = rabbit://nova:{SECRETS[0]}'q"x@127.0.0.1:5672,nova:{SECRETS[1]}@[::1]:5672/
[database]
connection = postgresql://nova@127.0.0.1/nova?password={SECRETS[2]}
[api_database]
connection = postgresql://nova@127.0.0.1/nova_api?sslmode=disable&sslpassword={SECRETS[3]}
[placement_database]
connection = postgresql://placement:{SECRETS[4]}%40x@127.0.0.1/placement
[placement]
auth_type = none
endpoint_override = http://admin:{SECRETS[5]}@127.0.0.1:8778
"""


def test_check_config_masks_every_planted_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(CONF)
    assert main(["check-config", "--config-file", str(conf)]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    for secret in SECRETS:
        assert secret not in text
    assert "transport_url = rabbit://nova:***@127.0.0.1:5672,nova:***@[::1]:5672/" in text
    assert "connection = postgresql://nova@127.0.0.1/nova?password=***" in text


def test_check_config_error_masks_the_url_it_quotes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(
        "[DEFAULT]\ntransport_url = rabbit://nova:S3cret'1@h:notaport/\n"
        "[api_database]\nconnection = postgresql://nova@127.0.0.1/nova_api\n"
    )
    assert main(["check-config", "--config-file", str(conf)]) == EX_CONFIG
    err = capsys.readouterr().err
    assert "configuration error" in err and "S3cret" not in err


@pytest.mark.parametrize(
    "call",
    [
        lambda: to_asyncpg_dsn("oracle://u:S3cret'x@h/db?password=S3cretQ"),
        lambda: to_asyncpg_dsn("sqlite:///x?password=S3cretQ"),
        lambda: parse_transport_url('kafka://u:S3cret"x@h/'),
        lambda: parse_transport_url("rabbit://u:S3cret@h:99999,v:S3cret2@h2/"),
    ],
)
def test_url_errors_quote_no_secret(call: object) -> None:
    with pytest.raises(ConfigError) as info:
        call()  # type: ignore[operator]
    assert "S3cret" not in str(info.value)


def test_log_lines_mask_dsn_query_passwords() -> None:
    record = logging.LogRecord(
        "asyncsched.test",
        logging.WARNING,
        __file__,
        1,
        "cannot load from %s (%s)",
        ("postgresql://p@db/placement?password=S3cretL", "rabbit://u:S3cret'M@h/"),
        None,
    )
    assert "S3cret" not in OneLineFormatter("%(message)s").format(record)
