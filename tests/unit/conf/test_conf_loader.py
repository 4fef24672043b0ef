"""The nova.conf loader: oslo.config semantics, typing, merging, and every error path."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from asyncsched.conf import ConfigSources, load, load_config, load_string
from asyncsched.conf.dsn import to_asyncpg_dsn
from asyncsched.conf.options import Config
from asyncsched.conf.transport_url import parse_transport_url
from asyncsched.exceptions import ConfigError

FIXTURE = Path(__file__).parent / "fixtures" / "nova.conf"


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------- a real nova.conf


def test_real_nova_conf_loads_unchanged() -> None:
    loaded = load(ConfigSources.of([str(FIXTURE)]))
    cfg = loaded.config
    assert loaded.files == (str(FIXTURE),)
    d = cfg.default
    assert d.transport_url.startswith("rabbit://openstack:Rabb1tPa55@10.10.0.11:5672,")
    assert d.service_down_time == 120
    assert d.report_interval == 30
    assert d.rpc_response_timeout == 90
    assert d.long_rpc_timeout == 3600
    assert d.default_availability_zone == "az-main"
    assert d.cpu_allocation_ratio == 16.0
    assert d.ram_allocation_ratio == 1.5
    assert d.disk_allocation_ratio is None
    assert d.host == "ctl1-scheduler"
    assert d.debug is False
    # SQLAlchemy URLs become asyncpg DSNs, query kept.
    assert cfg.database.connection == (
        "postgresql://nova:N0vaDbPass@10.10.0.11:5432/nova?sslmode=prefer"
    )
    assert cfg.api_database.connection == "postgresql://nova_api:Ap1DbPass@10.10.0.11:5432/nova_api"
    p = cfg.placement
    assert p.auth_type == "password"
    assert p.password == "Pl@cement Pass"  # quotes stripped, '@' kept
    assert p.valid_interfaces == ("internal",)
    assert p.timeout == 15.0
    assert cfg.scheduler.max_attempts == 5
    assert cfg.scheduler.max_placement_results == 500
    assert cfg.scheduler.workers == 4
    assert cfg.scheduler.limit_tenants_to_placement_aggregate is True
    fs = cfg.filter_scheduler
    assert fs.available_filters == (
        "nova.scheduler.filters.all_filters",
        "custom_filters.gpu.GpuFilter",
    )
    assert fs.enabled_filters == (
        "AvailabilityZoneFilter",
        "ComputeFilter",
        "ComputeCapabilitiesFilter",
        "ImagePropertiesFilter",
        "ServerGroupAntiAffinityFilter",
        "ServerGroupAffinityFilter",
        "AggregateInstanceExtraSpecsFilter",
        "PciPassthroughFilter",
        "NUMATopologyFilter",
    )
    assert fs.host_subset_size == 2
    assert fs.cpu_weight_multiplier == -1.5
    assert fs.build_failure_weight_multiplier == 100000.0
    assert fs.shuffle_best_same_weighed_hosts is True
    assert fs.track_instance_changes is False
    assert fs.isolated_hosts == ("gpu-1", "gpu-2")
    assert len(fs.isolated_images) == 2
    assert cfg.metrics.weight_setting == ("cpu.percent=-1.0", "memory.free=0.5")
    assert cfg.metrics.required is False
    assert cfg.workarounds.disable_fallback_pcpu_query is True
    r = cfg.oslo_messaging_rabbit
    assert r.amqp_durable_queues is True
    assert r.rabbit_quorum_queue is True
    assert r.rabbit_qos_prefetch_count == 64
    assert r.heartbeat_timeout_threshold == 30
    assert r.kombu_reconnect_delay == 0.5
    # Untouched options keep nova's defaults.
    assert cfg.asyncsched == Config().asyncsched
    assert fs.max_io_ops_per_host == 8


def test_real_nova_conf_ignores_unknown_with_one_note_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    loaded = load(ConfigSources.of([str(FIXTURE)]))
    notes = "\n".join(loaded.ignored)
    for unknown in ("[DEFAULT] my_ip", "[DEFAULT] compute_driver", "[database] max_pool_size"):
        assert unknown in notes
    for section in ("[vnc]", "[keystone_authtoken]", "[libvirt]", "[neutron]", "[cache]"):
        assert f"ignoring section {section}" in notes
    # [placement] keys that are not ours go to the keystoneauth plugin loader, not ignored
    assert "[placement] os_interface" not in notes
    assert ("os_interface", "internal") in loaded.config.placement.plugin_options
    assert "[workarounds] disable_group_policy_check_upcall" in notes
    assert len(loaded.ignored) == len(set(loaded.ignored))
    with caplog.at_level(logging.DEBUG, logger="asyncsched.conf.loader"):
        load_config([str(FIXTURE)])
    debug_lines = [r for r in caplog.records if r.levelno == logging.DEBUG]
    assert len(debug_lines) == len(loaded.ignored)


def test_no_files_gives_nova_defaults() -> None:
    assert load(ConfigSources()).config == Config()
    cfg = load_string("")
    assert cfg.default.control_exchange == "nova"
    assert cfg.scheduler.max_attempts == 3
    assert cfg.filter_scheduler.enabled_filters[0] == "ComputeFilter"


# --------------------------------------------------------------------------- oslo semantics


def test_default_section_does_not_leak_into_other_sections() -> None:
    cfg = load_string("[DEFAULT]\nconnection = postgresql://x@h/db\nhost_subset_size = 4\n")
    assert cfg.database.connection is None
    assert cfg.filter_scheduler.host_subset_size == 1


def test_section_names_case_insensitive_except_default() -> None:
    cfg = load_string("[Filter_Scheduler]\nhost_subset_size = 4\n[default]\nhost = x\n")
    assert cfg.filter_scheduler.host_subset_size == 4
    assert cfg.default.host == Config().default.host  # [default] is not [DEFAULT]


def test_last_value_wins_and_multi_accumulates() -> None:
    cfg = load_string(
        "[filter_scheduler]\nhost_subset_size = 2\nhost_subset_size = 3\n"
        "available_filters = a.B\navailable_filters = c.D\n"
        "enabled_filters = X\nenabled_filters = Y,Z\n"
    )
    assert cfg.filter_scheduler.host_subset_size == 3
    assert cfg.filter_scheduler.available_filters == ("a.B", "c.D")
    assert cfg.filter_scheduler.enabled_filters == ("Y", "Z")


def test_comments_quotes_continuations_and_colon() -> None:
    cfg = load_string(
        "# comment\n; other comment\n[DEFAULT]\n"
        "default_availability_zone: 'az # 1'\n"
        "host = sched-1 # not a comment in oslo\n"
        "[filter_scheduler]\n"
        "enabled_filters = A,\n"
        "   B,\n"
        "\tC\n"
        "weight_classes =\n"
    )
    assert cfg.default.default_availability_zone == "az # 1"
    assert cfg.default.host == "sched-1 # not a comment in oslo"
    assert cfg.filter_scheduler.enabled_filters == ("A", "B", "C")
    assert cfg.filter_scheduler.weight_classes == ()


def test_empty_value_for_optional_is_none() -> None:
    cfg = load_string("[DEFAULT]\ncpu_allocation_ratio =\n[placement]\nauth_type =\n")
    assert cfg.default.cpu_allocation_ratio is None
    assert cfg.placement.auth_type is None


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        *[("true", True), ("True", True), ("1", True), ("yes", True), ("on", True)],
        *[("false", False), ("FALSE", False), ("0", False), ("no", False), ("off", False)],
    ],
)
def test_booleans_as_oslo_accepts_them(word: str, expected: bool) -> None:
    assert load_string(f"[DEFAULT]\ndebug = {word}\n").default.debug is expected


def test_choices_are_normalised() -> None:
    assert load_string("[asyncsched]\nlog_level = warning\n").asyncsched.log_level == "WARNING"


def test_substitution_like_oslo() -> None:
    cfg = load_string(
        "[DEFAULT]\nmy_host = ctl9\nhost = $my_host-sched\n"
        "default_availability_zone = ${filter_scheduler.zone_name}\n"
        "[filter_scheduler]\nzone_name = az7\n"
        "[placement]\npassword = pa$$word\nusername = ${control_exchange}-svc\n"
    )
    assert cfg.default.host == "ctl9-sched"
    assert cfg.default.default_availability_zone == "az7"
    assert cfg.placement.password == "pa$word"
    assert cfg.placement.username == "nova-svc"  # an unset known option gives its default


def test_undefined_substitution_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"\[placement\] password.*\$nope"):
        load_string("[placement]\npassword = pa$nope\n", "f.conf")


def test_deprecated_names_are_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    # No option declares a deprecated name yet: check the mechanism on a patched field.
    import dataclasses

    from asyncsched.conf import options

    fields = {f.name: f for f in dataclasses.fields(options.SchedulerOptions)}
    meta = dict(fields["max_attempts"].metadata)
    meta["deprecated_names"] = ("scheduler_max_attempts",)
    monkeypatch.setattr(fields["max_attempts"], "metadata", meta)
    cfg = load_string("[scheduler]\nscheduler_max_attempts = 7\n")
    assert cfg.scheduler.max_attempts == 7


# --------------------------------------------------------------------------- files and dirs


def test_several_files_merge_in_order(tmp_path: Path) -> None:
    a = write(
        tmp_path, "a.conf", "[filter_scheduler]\nhost_subset_size = 2\navailable_filters = a.A\n"
    )
    b = write(
        tmp_path, "b.conf", "[filter_scheduler]\nhost_subset_size = 5\navailable_filters = b.B\n"
    )
    cfg = load_config([a, b])
    assert cfg.filter_scheduler.host_subset_size == 5
    assert cfg.filter_scheduler.available_filters == ("a.A", "b.B")
    assert load_config([b, a]).filter_scheduler.host_subset_size == 2


def test_config_dir_reads_sorted_conf_files(tmp_path: Path) -> None:
    d = tmp_path / "conf.d"
    d.mkdir()
    write(d, "20-late.conf", "[scheduler]\nmax_attempts = 9\n")
    write(d, "10-early.conf", "[scheduler]\nmax_attempts = 4\nmax_placement_results = 77\n")
    write(d, "99-ignored.txt", "[scheduler]\nmax_attempts = 1\n")
    base = write(tmp_path, "nova.conf", "[scheduler]\nmax_attempts = 2\nworkers = 3\n")
    loaded = load(ConfigSources.of([base], [str(d)]))
    assert loaded.config.scheduler.max_attempts == 9
    assert loaded.config.scheduler.max_placement_results == 77
    assert loaded.config.scheduler.workers == 3
    assert [Path(f).name for f in loaded.files] == ["nova.conf", "10-early.conf", "20-late.conf"]
    # Interleaved order is kept: a file after the dir wins over it.
    last = write(tmp_path, "last.conf", "[scheduler]\nmax_attempts = 6\n")
    sources = ConfigSources((("dir", str(d)), ("file", last)))
    assert load(sources).config.scheduler.max_attempts == 6


# --------------------------------------------------------------------------- error paths


BAD_VALUES = [
    ("DEFAULT", "debug", "maybe", "a boolean (true/false, yes/no, on/off, 1/0)"),
    ("DEFAULT", "service_down_time", "sixty", "an integer >= 1"),
    ("DEFAULT", "service_down_time", "0", "an integer >= 1"),
    ("DEFAULT", "service_down_time", "1.5", "an integer >= 1"),
    ("DEFAULT", "cpu_allocation_ratio", "-1", "a number >= 0, empty = unset"),
    ("DEFAULT", "cpu_allocation_ratio", "nan", "a number >= 0, empty = unset"),
    ("DEFAULT", "initial_cpu_allocation_ratio", "", "an empty value is not allowed"),
    ("asyncsched", "refresh_jitter", "1.5", "a number between 0 and 1"),
    ("asyncsched", "driver", "caching_scheduler", "one of filter_scheduler, chance"),
    ("placement", "auth_url", "keystone:5000", "an http:// or https:// URL"),
    ("placement", "endpoint_override", "ftp://placement", "an http:// or https:// URL"),
    ("placement", "valid_interfaces", "internal,private", "public, internal, admin"),
    ("DEFAULT", "transport_url", "kafka://k:9092/", "rabbit://user:pass@host"),
    ("DEFAULT", "transport_url", "rabbit:///", "names no broker host"),
    ("DEFAULT", "transport_url", "rabbit://u:p@mq:notaport/", "bad port"),
    ("database", "connection", "sqlite:////var/lib/nova/nova.sqlite", "a PostgreSQL or MySQL URL"),
    ("database", "connection", "mysql+pymysql://n:p@db:33o6/nova", "port is not a number"),
    (
        "database",
        "connection",
        "mysql+pymysql://n:p@db/nova?ssl_check_hostname=perhaps",
        "true or false",
    ),
    ("oslo_messaging_rabbit", "heartbeat_rate", "0", "an integer >= 1"),
    ("filter_scheduler", "pci_weight_multiplier", "-2", "a number >= 0"),
]


@pytest.mark.parametrize(("section", "option", "value", "allowed"), BAD_VALUES)
def test_bad_value_names_file_section_option_value_and_allowed(
    tmp_path: Path, section: str, option: str, value: str, allowed: str
) -> None:
    path = write(tmp_path, "bad.conf", f"[{section}]\n# comment\n{option} = {value}\n")
    with pytest.raises(ConfigError) as err:
        load_config([path])
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{path}:3: [{section}] {option} = ")
    assert allowed in message
    if option not in ("transport_url", "connection"):
        assert repr(value) in message


def test_mysql_urls_as_nova_conf_writes_them_load(tmp_path: Path) -> None:
    """Issue #25: kolla's nova.conf, databases on MariaDB, loads unchanged."""
    path = write(
        tmp_path,
        "nova.conf",
        "[api_database]\nconnection = mysql+pymysql://nova:Secr3t@db/nova_api?charset=utf8\n"
        "[database]\nconnection = mysql://nova:Secr3t@db:3307/nova\n",
    )
    cfg = load_config([path])
    assert cfg.api_database.connection == "mysql+pymysql://nova:Secr3t@db/nova_api?charset=utf8"
    assert cfg.database.connection == "mysql://nova:Secr3t@db:3307/nova"


def test_a_bad_mysql_url_is_named_and_its_password_masked(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nova.conf",
        "[api_database]\nconnection = mysql+oursql://nova:Secr3t@db/nova_api\n",
    )
    with pytest.raises(ConfigError) as err:
        load_config([path])
    message = str(err.value)
    assert "[api_database] connection" in message and "oursql" in message
    assert "Secr3t" not in message  # the password of a bad URL is masked


@pytest.mark.parametrize(
    ("parse", "url", "shown"),
    [
        (parse_transport_url, "rabbit://u:S3cret@mq:notaport,v:Other1@mq2/", "u:***@mq"),
        (parse_transport_url, "kafka://u:S3cret@mq/", "u:***@mq"),
        (to_asyncpg_dsn, "oracle://nova:S3cret@db/nova", "nova:***@db"),
    ],
)
def test_url_errors_mask_every_password_themselves(
    parse: Callable[[str], object], url: str, shown: str
) -> None:
    """The parsers' own messages mask the passwords (not only the loader's masking of them)."""
    with pytest.raises(ConfigError) as err:
        parse(url)
    assert "S3cret" not in str(err.value) and "Other1" not in str(err.value)
    assert shown in str(err.value)


def test_bad_secret_value_is_masked(tmp_path: Path) -> None:
    path = write(tmp_path, "nova.conf", "[DEFAULT]\ntransport_url = kafka://u:TopS3cret@k/\n")
    with pytest.raises(ConfigError) as err:
        load_config([path])
    assert "TopS3cret" not in str(err.value)
    assert "kafka://u:***@k/" in str(err.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[DEFAULT]\nthis line has no equals\n", r":2: cannot parse line"),
        ("host = x\n", r":1: option outside of any \[section\]"),
        ("[DEFAULT\nhost = x\n", r":1: invalid section header"),
        ("[]\n", r":1: invalid section header"),
    ],
)
def test_syntax_errors_name_file_and_line(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path, "syntax.conf", text)
    with pytest.raises(ConfigError, match=expected) as err:
        load_config([path])
    assert str(err.value).startswith(path)


def test_missing_file_and_dir_and_binary_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config file .*nope.conf not found"):
        load_config([str(tmp_path / "nope.conf")])
    with pytest.raises(ConfigError, match=r"config directory .*nodir not found"):
        load_config(dirs=[str(tmp_path / "nodir")])
    binary = tmp_path / "bin.conf"
    binary.write_bytes(b"[DEFAULT]\nhost = \xff\xfe\n")
    with pytest.raises(ConfigError, match=r"bin.conf: not UTF-8"):
        load_config([str(binary)])
    with pytest.raises(ConfigError, match="not found"):
        load_config([str(tmp_path)])  # a directory given as --config-file
