"""Decisions that differed from nova 34's, each on the minimal case the parity suite
(tests/parity) found, now decided as nova decides them."""

from __future__ import annotations

import json
from datetime import datetime

from asyncsched.objects.models import ImageMeta, ImageMetaProps
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.compute_capabilities_filter import ComputeCapabilitiesFilter
from asyncsched.scheduling.filters.image_props_filter import (
    ImagePropertiesFilter,
    version_satisfies,
)
from asyncsched.scheduling.filters.json_filter import JsonFilter
from asyncsched.scheduling.filters.metrics_filter import MetricsFilter
from asyncsched.scheduling.metrics_setting import parse_setting
from asyncsched.scheduling.weighers.metrics import MetricsWeigher
from tests.support.sched_helpers import config, host, spec


def test_weight_setting_names_are_kept_as_written() -> None:
    assert parse_setting(("cpu.percent =1.0", "cpu.frequency= 2", "=3", "x")) == [
        ("cpu.percent ", 1.0),
        ("cpu.frequency", 2.0),
    ]
    conf = config(metrics={"weight_setting": ("cpu.percent =1.0",), "required": False})
    reporting = host("h1", metrics={"cpu.percent": 50})
    # nova looks for a metric named "cpu.percent " which no host reports
    assert MetricsFilter(conf).state_passes(reporting, spec()) == "metrics"
    other = host("h2", metrics={"cpu.percent": 10})
    weights = DecisionEngine(conf, [], [MetricsWeigher(conf)]).start([reporting, other])
    assert weights.weigh(spec()).tolist() == [0.0, 0.0]  # both "unavailable": no preference


def test_version_predicates_compare_as_packaging_versions() -> None:
    assert version_satisfies("== 8", "8.0.0")
    assert version_satisfies(">= 8.0.0, < 9", "8.0.0")
    assert not version_satisfies("> 8", "8.0.0")  # tuples made 8.0.0 > 8
    assert version_satisfies("== 8.2", "8.2.0")
    assert not version_satisfies("< 9.1", "9.1.0")
    assert not version_satisfies(">= x.y", "8.0.0")  # nova raises; the host matches nothing
    f = ImagePropertiesFilter(config())
    image = ImageMeta(
        id="i", properties=ImageMetaProps(hw_architecture="x86_64", img_hv_requested_version="<= 8")
    )
    h = host("h1", hypervisor_version=8000000, supported_instances=(("x86_64", "qemu", "hvm"),))
    assert f.state_passes(h, spec(image=image)) is None


def test_json_filter_host_ip_is_an_address_not_a_string() -> None:
    f = JsonFilter(config())
    h = host("h1", host_ip="10.1.2.8")

    def passes(query: list[object]) -> bool:
        s = spec(scheduler_hints={"query": (json.dumps(query),)})
        return f.state_passes(h, s) is None

    assert not passes(["=", "$host_ip", "10.1.2.8"])  # an IPAddress never equals a string
    assert not passes(["in", "$host_ip", "10.1.2.8"])
    assert not passes([">=", "$host_ip", "10.0.0.1"])  # nova raises TypeError; the host fails
    assert passes(["=", "$host_ip", "$host_ip"])
    assert passes(["=", "$host", "h1"])  # other attributes still compare as strings


def test_compute_capabilities_bare_keys_are_nova_host_state_attributes() -> None:
    f = ComputeCapabilitiesFilter(config())
    h = host("h1", stats={"ssd": "true"}, pci_pools=(), compute_node_id=7)

    def passes(**extra_specs: str) -> bool:
        return f.state_passes(h, spec(extra_specs=extra_specs)) is None

    assert passes(limits="{}")  # nova's HostState.limits, still empty at this filter
    assert not passes(pci_stats="<in> 8086")  # a PciDeviceStats object: no string matches it
    assert passes(compute_node_id="1")  # not an attribute of nova's HostState: ignored
    assert passes(ssd="true") and not passes(ssd="false")  # stats
    assert passes(free_ram_mb=">= 1024") and not passes(free_ram_mb=">= 100000")
    assert passes(key="anything")  # our property, not nova's: ignored


def test_capabilities_bare_updated_is_the_aware_utc_timestamp() -> None:
    """nova matches str(host_state.updated) (tests/parity/test_capabilities_updated.py asks
    nova itself); every host failed here before."""
    f = ComputeCapabilitiesFilter(config())
    h = host("h1", updated=datetime(2026, 11, 27, 6, 20, 31, 123456))  # naive: UTC, as in the DB

    def passes(req: str) -> bool:
        return f.state_passes(h, spec(extra_specs={"updated": req})) is None

    assert passes("<in> 2026") and passes("<in> 06:20:31.123456+00:00")
    assert not passes("<in> 2025") and not passes("2026")
    never = host("h2", updated=None)  # nova: no capability, the host fails
    assert f.state_passes(never, spec(extra_specs={"updated": "<in> 2"})) == "capabilities"
