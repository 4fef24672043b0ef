"""check-config for an operator's first hour (issue #22): the minimal starter config, typos
warned up front with file:line and "did you mean", every error one short line with file:line,
filters nova removed named as removed, a database URL's port checked."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from asyncsched.cli import EX_CONFIG, main
from asyncsched.scheduling.loader import REMOVED_FILTERS
from tests.support.check_config import BASE, check_config

ROOT = Path(__file__).resolve().parents[3]
MINIMAL = ROOT / "config" / "asyncsched.conf.minimal"
ERROR = "asyncsched: configuration error: "
MAX_LINE = 200  # characters, with the file named /etc/nova/nova.conf as on a controller
ETC = "/etc/nova/nova.conf"


def fill(text: str, values: dict[str, str]) -> str:
    """Write each ``name =`` left empty in the starter file."""
    for name, value in values.items():
        text, n = re.subn(rf"^{name} =$", f"{name} = {value}", text, flags=re.M)
        assert n == 1, name
    return text


def test_the_minimal_config_is_refused_until_filled_then_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = check_config(MINIMAL, capsys)
    assert code == EX_CONFIG
    assert err[0].startswith(f"{ERROR}{MINIMAL}:") and "transport_url" in err[0]
    conf = tmp_path / "asyncsched.conf"
    conf.write_text(
        fill(
            MINIMAL.read_text(),
            {
                "transport_url": "rabbit://guest:guest@127.0.0.1:5672/",
                "connection": "postgresql://root@127.0.0.1:5432/nova_api",
                "auth_url": "http://127.0.0.1:5000/v3",
                "password": "s3cret-for-the-test",
            },
        )
    )
    code, err = check_config(conf, capsys)
    assert code == 0, err
    assert err == ["# configuration OK"]  # no typo warning in the starter file either


def test_typos_are_warned_up_front_with_file_line_and_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(
        BASE + "[filter_scheduler]\nhost_subset_sise = 3\n"  # line 8
        "[filter_schedular]\nenabled_filters = ComputeFilter\n"  # line 10: its first option
        "[asyncsched]\nadmin_lisen = 127.0.0.1:9105\n"  # line 12
        "[libvirt]\nvirt_type = kvm\n"  # nova's own: quiet
        "[DEFAULT]\nmy_ip = 10.0.0.1\n"  # nova's own: quiet
    )
    code, err = check_config(conf, capsys)
    assert code == 0
    assert err[:3] == [
        f"asyncsched: warning: {conf}:8: unknown option [filter_scheduler] host_subset_sise; "
        "did you mean host_subset_size?",
        f"asyncsched: warning: {conf}:10: unknown section [filter_schedular]; "
        "did you mean [filter_scheduler]?",
        f"asyncsched: warning: {conf}:12: unknown option [asyncsched] admin_lisen; "
        "did you mean admin_listen?",
    ]
    assert not any("libvirt" in line or "my_ip" in line for line in err)


BAD = [
    ("[filter_scheduler]\nenabled_filters = ComputeFilter,ComputeFiltr\n", 8, "ComputeFiltr"),
    ("[filter_scheduler]\nweight_classes = RAMWeigher,RamWeigher\n", 8, "RamWeigher"),
    ("[placement]\nauth_type = v3pasword\n", 8, "v3pasword"),
    ("[api_database]\nconnection = postgresql://nova@db:5x/nova_api\n", 8, "port"),
    ("[DEFAULT]\ntransport_url = kafka://h:9092/\n", 8, "rabbit://"),
    ("[filter_scheduler]\nhost_subset_size = many\n", 8, "an integer"),
    ("[asyncsched]\nadmin_listen = nowhere\n", 8, "HOST:PORT"),
]


@pytest.mark.parametrize(("extra", "line", "names"), BAD)
def test_every_error_is_one_short_line_with_file_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, line: int, names: str
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(BASE + extra)
    code, err = check_config(conf, capsys)
    assert code == EX_CONFIG
    (message,) = err
    assert message.startswith(f"{ERROR}{conf}:{line}: "), message
    assert names in message
    assert len(message.replace(str(conf), ETC)) < MAX_LINE, (len(message), message)


@pytest.mark.parametrize(
    ("extra", "closest"),
    [
        (
            "[filter_scheduler]\nenabled_filters = ComputeFiltr\n",
            "closest: ComputeFilter, ComputeCapabilitiesFilter, ",
        ),
        ("[filter_scheduler]\nweight_classes = RamWeigher\n", "closest: RAMWeigher, "),
        ("[placement]\nauth_type = v3pasword\n", "closest installed: v3password, "),
    ],
)
def test_an_unknown_plugin_names_the_three_closest_not_every_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: str, closest: str
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(BASE + extra)
    _, (message,) = check_config(conf, capsys)
    assert closest in message
    listed = message.split("closest")[1].split(":", 1)[1].split("(")[0]
    assert len(listed.split(",")) == 3, message


@pytest.mark.parametrize("name", sorted(REMOVED_FILTERS))
def test_a_filter_nova_removed_is_named_as_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    conf = tmp_path / "nova.conf"
    conf.write_text(BASE + f"[filter_scheduler]\nenabled_filters = ComputeFilter,{name}\n")
    code, (message,) = check_config(conf, capsys)
    assert code == EX_CONFIG
    assert f"{conf}:8: [filter_scheduler] enabled_filters: {name} was removed in nova " in message
    assert REMOVED_FILTERS[name] in message
    assert len(message.replace(str(conf), ETC)) < MAX_LINE


def test_az_filter_release_is_the_one_nova_removed_it_in() -> None:
    # nova commit 5edd805fe2 "Remove deprecated AZ filter", first in tag 28.0.0
    assert REMOVED_FILTERS["AvailabilityZoneFilter"].startswith("28.0.0 ")
    assert main(["generate-sample", "--output", "/dev/null"]) == 0


def test_check_config_takes_mysql_urls_and_names_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue #25: nova.conf's MariaDB URLs pass; a bad one is one line with file:line, why,
    and the password masked."""
    good = tmp_path / "good.conf"
    good.write_text(
        BASE.replace(
            "postgresql://nova@127.0.0.1:1/nova_api",
            "mysql+pymysql://nova:S3cret@db1/nova_api?charset=utf8",
        )
        + "[database]\nconnection = mysql://nova:S3cret@/nova?unix_socket=/run/mysqld.sock\n"
    )
    assert check_config(good, capsys)[0] == 0
    bad = tmp_path / "bad.conf"
    bad.write_text(BASE + "[database]\nconnection = mysql+pymysql://nova:S3cret@db:33o6/nova\n")
    code, err = check_config(bad, capsys)
    assert code == EX_CONFIG and len(err) == 1
    assert f"{bad}:8: [database]" in err[0] and "port is not a number" in err[0]
    assert "S3cret" not in err[0]
