"""``check-config`` refuses what ``serve`` refuses, with the same one line, and warns."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from asyncsched.cli import EX_CONFIG, main
from tests.support.check_config import BASE, check_config

ROOT = Path(__file__).resolve().parents[3]


def serve_error(conf: Path) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "asyncsched", "serve", "--config-file", str(conf)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == EX_CONFIG, proc.stderr
    # serve logs its "starting" line first; the refusal is the same single line
    return [line for line in proc.stderr.splitlines() if line.startswith("asyncsched: ")]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "[filter_scheduler]\nenabled_filters = ComputeFilter,NoSuchFilter\n",
            "NoSuchFilter",
        ),
        ("[filter_scheduler]\nweight_classes = nova.scheduler.weights.NoSuch\n", "NoSuch"),
        ("[placement]\nauth_type = v3nosuchplugin\n", "no keystoneauth plugin of that name"),
        ("[placement]\nauth_type = v3password\n", "missing required option(s) auth_url"),
        ("[scheduler]\nquery_placement_for_routed_network_aggregates = true\n", "Neutron"),
    ],
)
def test_check_config_fails_as_serve_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, expected: str
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(BASE + extra)
    code, err = check_config(conf, capsys)
    assert code == EX_CONFIG
    assert len(err) == 1 and err[0].startswith("asyncsched: configuration error: ")
    assert expected in err[0]
    assert err == serve_error(conf)


def test_check_config_without_api_database_fails_as_serve_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text("[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:1\n")
    code, err = check_config(conf, capsys)
    assert code == EX_CONFIG and "[api_database] connection is required" in err[0]
    assert err == serve_error(conf)


def test_check_config_unwritable_log_file_is_the_serve_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(BASE + f"[DEFAULT]\nlog_file = {tmp_path}/no/such/dir/asyncsched.log\n")
    code, err = check_config(conf, capsys)
    assert code == EX_CONFIG
    assert main(["serve", "--config-file", str(conf)]) == EX_CONFIG
    assert err == capsys.readouterr().err.strip().splitlines()
    assert "cannot open: No such file or directory" in err[0]


def test_check_config_ok_with_admin_token_and_warns_about_spaced_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(
        BASE + "[metrics]\nweight_setting = cpu.frequency = 1, cpu.user.percent=-1, junk\n"
        "[filter_scheduler]\nimage_props_weight_setting = os_distro=1\n"
    )
    code, err = check_config(conf, capsys)
    assert code == 0
    assert err[-1] == "# configuration OK"
    warnings = [line for line in err if line.startswith("asyncsched: warning: ")]
    assert len(warnings) == 2
    assert "'cpu.frequency = 1' has spaces around the name" in warnings[0]
    assert "'cpu.frequency '" in warnings[0]
    assert "'junk' is not name=ratio" in warnings[1]


def test_check_config_warns_about_placement_keys_nothing_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    # username/password belong to password plugins, os_interface to nobody; endpoint and
    # token are admin_token's, region_name the adapter's
    conf.write_text(BASE + "[placement]\nusername = nova\nos_interface = internal\n")
    code, err = check_config(conf, capsys)
    assert code == 0
    warnings = sorted(line for line in err if line.startswith("asyncsched: warning: "))
    assert len(warnings) == 2
    assert "[placement] os_interface: not an option of auth plugin admin_token" in warnings[0]
    assert "[placement] username: not an option of auth plugin admin_token" in warnings[1]


def test_metrics_names_are_taken_as_written_as_nova_does() -> None:
    from asyncsched.scheduling.metrics_setting import parse_setting

    assert parse_setting(("cpu.frequency = 1", "a=2", "=3", "b")) == [
        ("cpu.frequency ", 1.0),
        ("a", 2.0),
    ]
