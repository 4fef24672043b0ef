"""The committed sample, ``check-config`` output with secrets masked, and the CLI error path."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from asyncsched.cli import EX_CONFIG, main
from asyncsched.conf import load_string
from asyncsched.conf.options import SECTIONS, Config
from asyncsched.conf.redact import mask_secrets
from asyncsched.conf.render import generate_sample

ROOT = Path(__file__).resolve().parents[3]
SAMPLE = ROOT / "config" / "asyncsched.conf.sample"


def test_committed_sample_matches_the_option_definitions() -> None:
    assert SAMPLE.read_text(encoding="utf-8") == generate_sample(), (
        "config/asyncsched.conf.sample is stale: run `make sample`"
    )


def test_sample_documents_every_option() -> None:
    text = generate_sample()
    for ini_name, attr in SECTIONS.items():
        assert f"\n[{ini_name}]\n" in text
        for f in dataclasses.fields(getattr(Config(), attr)):
            if f.metadata.get("rest"):  # the plugin's own options, documented by example
                continue
            assert f"\n#{f.name} = " in text, f"[{ini_name}] {f.name} missing from the sample"
    assert "reloadable on SIGHUP" in text
    assert "#host = <current hostname>" in text  # machine-independent


def test_uncommented_sample_loads_back_to_the_defaults() -> None:
    """Every default the sample shows is a valid value that means the default."""
    lines = []
    for line in generate_sample().splitlines():
        if line.startswith("#") and " = " in line and not line.startswith("# "):
            name, value = line[1:].split(" = ", 1)
            if name == "host":
                continue
            lines.append(f"{name} = {'' if value == '<None>' else value}")
        elif line.startswith("["):
            lines.append(line)
    assert load_string("\n".join(lines) + "\n", "sample") == Config()


SECRET_CONF = """\
[DEFAULT]
transport_url = rabbit://nova:RabbitPw1@mq1:5672,nova:RabbitPw2@mq2:5672/
[database]
connection = postgresql+psycopg2://nova:CellDbPw@db/nova
[api_database]
connection = postgresql://nova:ApiDbPw@db/nova_api
[placement]
auth_type = v3applicationcredential
auth_url = http://keystone:5000/v3
application_credential_id = ac1
password = PlacementPw
application_credential_secret = AppCredSecret
[filter_scheduler]
host_subset_size = 3
[keystone_authtoken]
password = NotOursPw
"""


def test_check_config_prints_effective_config_with_secrets_masked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(SECRET_CONF)
    assert main(["check-config", "--config-file", str(conf)]) == 0
    out = capsys.readouterr().out
    for secret in ("RabbitPw1", "RabbitPw2", "CellDbPw", "ApiDbPw", "PlacementPw", "AppCredSecret"):
        assert secret not in out
    assert "NotOursPw" not in out
    assert "transport_url = rabbit://nova:***@mq1:5672,nova:***@mq2:5672/" in out
    assert "connection = postgresql://nova:***@db/nova\n" in out
    assert "password = ***" in out
    assert "application_credential_secret = ***" in out
    assert "host_subset_size = 3" in out
    assert "max_attempts = 3" in out  # defaults shown too: it is the effective config
    assert "ignoring section [keystone_authtoken]" in out
    assert f"files read, in order: {conf}" in out


def test_check_config_error_is_one_line_and_exit_78(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[scheduler]\nmax_attempts = 0\n")
    assert main(["check-config", "--config-file", str(conf)]) == EX_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"asyncsched: configuration error: {conf}:2: [scheduler] max_attempts = '0': "
        "invalid value; allowed: an integer >= 1"
    ]


def test_serve_with_bad_config_exits_without_traceback(tmp_path: Path) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[api_database]\nconnection = mysql+pymysql://nova:pw@db:port/nova_api\n")
    proc = subprocess.run(
        [sys.executable, "-m", "asyncsched", "serve", "--config-file", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == EX_CONFIG
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "[api_database] connection" in lines[0] and "MySQL URL" in lines[0]
    assert "port is not a number" in lines[0] and ":pw@" not in lines[0]


def test_generate_sample_command_writes_the_sample(tmp_path: Path) -> None:
    out = tmp_path / "s.conf"
    assert main(["generate-sample", "--output", str(out)]) == 0
    assert out.read_text() == generate_sample()


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("{'_context_auth_token': 'gAAAAABtoken', 'x': 1}", "gAAAAABtoken"),
        ('{"_context_auth_token": "gAAAAABtoken"}', "gAAAAABtoken"),
        ("rabbit://u:pw1@h1:5672,u:pw2@h2:5672/", "pw1"),
        ("rabbit://u:pw1@h1:5672,u:pw2@h2:5672/", "pw2"),
        ("postgresql+psycopg2://nova:dbpw@db/nova", "dbpw"),
        ("password=hunter2 next", "hunter2"),
        ("admin_password: hunter2", "hunter2"),
        ("X-Auth-Token: gAAAAtoken", "gAAAAtoken"),
        ("'auth_token': 'tok-123'", "tok-123"),
        ("secret=abc&x=1", "abc"),
    ],
)
def test_mask_secrets(text: str, secret: str) -> None:
    masked = mask_secrets(text)
    assert secret not in masked
    assert "***" in masked


def test_mask_secrets_leaves_ordinary_text_alone() -> None:
    text = "selected host=compute-1 node=compute-1 for instance 5b7e0e3c weight=1.5"
    assert mask_secrets(text) == text


def test_check_config_shows_multi_values_one_per_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    a, b = (
        "nova.scheduler.filters.all_filters",
        "nova.scheduler.filters.compute_filter.ComputeFilter",
    )
    conf.write_text(
        "[api_database]\nconnection = postgresql://db/nova_api\n[placement]\nauth_type = none\n"
        f"endpoint_override = http://p\n[filter_scheduler]\navailable_filters = {a}\n"
        f"available_filters = {b}\n"
    )
    assert main(["check-config", "--config-file", str(conf)]) == 0
    out = capsys.readouterr().out
    assert f"available_filters = {a}\navailable_filters = {b}\n" in out


def test_cli_keeps_config_file_and_dir_order(tmp_path: Path) -> None:
    from asyncsched.cli import build_parser, sources_from_args

    args = build_parser().parse_args(
        ["serve", "--config-file", "a.conf", "--config-dir", "d", "--config-file", "b.conf"]
    )
    assert sources_from_args(args).items == (("file", "a.conf"), ("dir", "d"), ("file", "b.conf"))


def test_serve_with_unwritable_log_file_is_a_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(f"[DEFAULT]\nlog_file = {tmp_path}/no/such/dir/asyncsched.log\n")
    assert main(["serve", "--config-file", str(conf)]) == EX_CONFIG
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "[DEFAULT] log_file" in err[0] and "cannot open" in err[0]
