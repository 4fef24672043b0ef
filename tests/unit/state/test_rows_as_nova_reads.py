"""compute_nodes columns read the way nova's ComputeNode / HostState read them.

Each case is a minimal one the parity suite against nova 34 (tests/parity) found.
"""

from __future__ import annotations

import json

from asyncsched.objects.models import ImageMeta, ImageMetaProps
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.image_props_filter import ImagePropertiesFilter
from asyncsched.scheduling.weighers.metrics import MetricsWeigher
from asyncsched.state.rows import parse_metrics, parse_supported_instances
from tests.support.sched_helpers import config, host, spec


def _metrics(**values: float) -> str:
    return json.dumps(
        [{"name": n.replace("_", "."), "value": v, "source": "m"} for n, v in values.items()]
    )


def test_percent_metrics_scale_by_100_and_every_value_is_an_integer() -> None:
    read = parse_metrics(_metrics(cpu_percent=0.57, cpu_idle_percent=0.29, cpu_frequency=2.7))
    # MonitorMetricList.from_json multiplies, MonitorMetric.value (IntegerField) truncates:
    # 0.57 * 100 is 56.99999999999999 in floating point, so nova holds 56
    assert read == {"cpu.percent": 56, "cpu.idle.percent": 28, "cpu.frequency": 2}
    assert all(type(v) is int for v in read.values())


def test_metrics_weigher_ranks_as_nova_with_percent_metrics() -> None:
    conf = config(metrics={"weight_setting": ("cpu.percent=1.0", "cpu.frequency=1.0")})
    busy = host("busy", metrics=parse_metrics(_metrics(cpu_percent=0.9, cpu_frequency=10)))
    fast = host("fast", metrics=parse_metrics(_metrics(cpu_percent=0.1, cpu_frequency=50)))
    # raw fractions would give busy 10.9 < fast 50.1; nova weighs 90 + 10 > 10 + 50
    weights = DecisionEngine(conf, [], [MetricsWeigher(conf)]).start([busy, fast]).weigh(spec())
    assert weights.tolist() == [1.0, 0.0]


def test_supported_instances_are_canonicalised_as_hvspec_fields() -> None:
    read = parse_supported_instances(
        '[["X86_64", "QEMU", "HVM"], ["i386", "kvm", "hv"], ["x86_64", "xapi", "xen"]]'
    )
    assert read == (("x86_64", "qemu", "hvm"), ("i686", "kvm", "hvm"), ("x86_64", "xen", "xen"))
    f = ImagePropertiesFilter(config())
    h = host("h1", supported_instances=read)
    for arch in ("x86_64", "i686"):
        image = ImageMeta(id="i", properties=ImageMetaProps(hw_architecture=arch))
        assert f.state_passes(h, spec(image=image)) is None
