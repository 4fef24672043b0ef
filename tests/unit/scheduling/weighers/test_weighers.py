"""Weigher parity: raw scores, nova's min/max normalisation, multipliers, aggregate overrides."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from asyncsched.objects.host_resources import PciDevicePool
from asyncsched.objects.models import (
    CellMapping,
    Destination,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
)
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.base import BaseHostWeigher
from asyncsched.scheduling.weighers.build_failure import BuildFailureWeigher
from asyncsched.scheduling.weighers.cpu import CPUWeigher
from asyncsched.scheduling.weighers.cross_cell import CrossCellWeigher
from asyncsched.scheduling.weighers.disk import DiskWeigher
from asyncsched.scheduling.weighers.hypervisor_version import HypervisorVersionWeigher
from asyncsched.scheduling.weighers.image_props import ImagePropertiesWeigher
from asyncsched.scheduling.weighers.io_ops import IoOpsWeigher
from asyncsched.scheduling.weighers.metrics import ComputeHostMetricNotFound, MetricsWeigher
from asyncsched.scheduling.weighers.num_instances import NumInstancesWeigher
from asyncsched.scheduling.weighers.pci import PCIWeigher
from asyncsched.scheduling.weighers.ram import RAMWeigher
from asyncsched.scheduling.weighers.soft_affinity import ServerGroupSoftAffinityWeigher
from asyncsched.scheduling.weighers.soft_anti_affinity import ServerGroupSoftAntiAffinityWeigher
from bench import reference_scheduler as reference
from tests.support.sched_helpers import agg, config, host, spec

GROUP_SOFT = InstanceGroup(uuid="g", policy="soft-affinity", members=("a", "b", "c"))
GROUP_ANTI = InstanceGroup(uuid="g", policy="soft-anti-affinity", members=("a", "b", "c"))
XCELL = Destination(cell=CellMapping(uuid="cell1"), allow_cross_cell_move=True)

# (weigher, config, [host kwargs], spec kwargs, expected raw scores)
RAW: list[
    tuple[type[BaseHostWeigher], dict[str, Any], list[dict[str, Any]], dict[str, Any], list[float]]
] = [
    (RAMWeigher, {}, [{"free_ram_mb": 512}, {"free_ram_mb": -10}], {}, [512, -10]),
    (
        CPUWeigher,
        {},
        [{"vcpus_total": 8, "vcpus_used": 2, "cpu_allocation_ratio": 2.0}],
        {},
        [14.0],
    ),
    (DiskWeigher, {}, [{"free_disk_mb": 2048}], {}, [2048]),
    (IoOpsWeigher, {}, [{"num_io_ops": 3}], {}, [3]),
    (
        HypervisorVersionWeigher,
        {},
        [{"hypervisor_version": 9000000}, {"hypervisor_version": None}],
        {},
        [9000000, 0],
    ),
    (NumInstancesWeigher, {}, [{"num_instances": 7}], {}, [7]),
    (BuildFailureWeigher, {}, [{"failed_builds": 2}], {}, [2]),
    (
        PCIWeigher,
        {},
        [
            {},
            {"pci_pools": (PciDevicePool("1", "2", 0, 3), PciDevicePool("1", "3", 0, 2))},
            {"pci_pools": (PciDevicePool("1", "2", 0, 500),)},
        ],
        {},
        [100, 95, 1],
    ),
    (
        ServerGroupSoftAffinityWeigher,
        {},
        [{"instances": {"a", "b", "x"}}, {}],
        {"instance_group": GROUP_SOFT},
        [2, 0],
    ),
    (
        ServerGroupSoftAffinityWeigher,
        {},
        [{"instances": {"a"}}],
        {"instance_group": GROUP_ANTI},
        [0],
    ),
    (
        ServerGroupSoftAntiAffinityWeigher,
        {},
        [{"instances": {"a", "b"}}],
        {"instance_group": GROUP_ANTI},
        [-2],
    ),
    (
        CrossCellWeigher,
        {},
        [{"cell_uuid": "cell1"}, {"cell_uuid": "cell2"}],
        {"requested_destination": XCELL},
        [1, -1],
    ),
    (CrossCellWeigher, {}, [{"cell_uuid": "cell2"}], {}, [0]),
    (
        MetricsWeigher,
        {"metrics": {"weight_setting": ("a=2", "b=-1")}},
        [{"metrics": {"a": 3.0, "b": 1.0}}],
        {},
        [5.0],
    ),
    (
        MetricsWeigher,
        {"metrics": {"weight_setting": ("a=2",), "required": False}},
        [{"metrics": {}}],
        {},
        [-10000.0],
    ),
    (
        ImagePropertiesWeigher,
        {"filter_scheduler": {"image_props_weight_multiplier": 1.0}},
        [
            {
                "instances": {"i1", "i2"},
                "extra": {
                    "instance_image_props": {
                        "i1": {"hw_os_type": "linux"},
                        "i2": {"hw_os_type": "windows"},
                    }
                },
            }
        ],
        {"image": ImageMeta(properties=ImageMetaProps(other={"hw_os_type": "linux"}))},
        [1.0],
    ),
    (
        ImagePropertiesWeigher,
        {},
        [{"instances": {"i1"}, "extra": {"instance_image_props": {"i1": {"hw_os_type": "linux"}}}}],
        {"image": ImageMeta(properties=ImageMetaProps(other={"hw_os_type": "linux"}))},
        [0.0],
    ),
]


@pytest.mark.parametrize(("cls", "conf", "hosts", "spec_kw", "expected"), RAW)
def test_raw_scores(
    cls: type[BaseHostWeigher],
    conf: dict[str, Any],
    hosts: list[dict[str, Any]],
    spec_kw: dict[str, Any],
    expected: list[float],
) -> None:
    w = cls(config(**conf))
    states = [host(f"h{i}", **kw) for i, kw in enumerate(hosts)]
    s = spec(**spec_kw)
    assert [w.weigh(HostCandidate(h), s) for h in states] == expected
    assert w.weigh_states(states, s) == expected


def test_metrics_required_missing_raises() -> None:
    w = MetricsWeigher(config(metrics={"weight_setting": ("a=1",)}))
    with pytest.raises(ComputeHostMetricNotFound):
        w.weigh_states([host("h1")], spec())


def test_build_failure_multiplier_is_negated() -> None:
    w = BuildFailureWeigher(config())
    assert w.config_multiplier() == -1000000.0
    h = host("h1", aggregates=(agg(("h1",), build_failure_weight_multiplier="10"),))
    assert w.multiplier(h) == -10.0


def test_multiplier_aggregate_override_takes_minimum_and_survives_bad_values() -> None:
    w = RAMWeigher(config(filter_scheduler={"ram_weight_multiplier": 3.0}))
    assert w.multiplier(host("h1")) == 3.0
    two = (agg(("h1",), ram_weight_multiplier="2.5"), agg(("h1",), ram_weight_multiplier="-1"))
    assert w.multiplier(host("h1", aggregates=two)) == -1.0
    bad = (agg(("h1",), ram_weight_multiplier="lots"),)
    assert w.multiplier(host("h1", aggregates=bad)) == 3.0


def _weights(
    conf: Any, weighers: list[BaseHostWeigher], states: list[Any], s: Any, aggs: Sequence[Any] = ()
) -> tuple[list[float], list[float]]:
    ref = reference.weigh_hosts(weighers, [HostCandidate(h) for h in states], s)
    eng = DecisionEngine(conf, [], weighers)
    eng.set_aggregates(aggs)
    fast = eng.start(states).weigh(s).tolist()
    return ref, fast


def test_normalisation_minval_zero_and_multiplier() -> None:
    conf = config(filter_scheduler={"ram_weight_multiplier": 2.0})
    states = [host("a", free_ram_mb=1024), host("b", free_ram_mb=4096), host("c", free_ram_mb=-512)]
    ref, fast = _weights(conf, [RAMWeigher(conf)], states, spec())
    # minval 0: negatives clamp to 0, the rest scale as raw/max
    assert ref == fast == [2.0 * 1024 / 4096, 2.0, 0.0]


def test_min_max_normalisation_without_minval() -> None:
    conf = config()
    states = [
        host("a", hypervisor_version=1000),
        host("b", hypervisor_version=3000),
        host("c", hypervisor_version=2000),
    ]
    ref, fast = _weights(conf, [HypervisorVersionWeigher(conf)], states, spec())
    assert ref == fast == [0.0, 1.0, 0.5]


def test_all_equal_scores_normalise_to_zero_and_single_host_is_unweighed() -> None:
    conf = config()
    states = [host("a", free_ram_mb=5), host("b", free_ram_mb=5)]
    # minval 0 keeps lo at 0: equal positive free RAM normalises to 1.0, not 0
    assert _weights(conf, [RAMWeigher(conf)], states, spec()) == ([1.0, 1.0], [1.0, 1.0])
    zero = [host("a", free_ram_mb=0), host("b", free_ram_mb=-3)]
    assert _weights(conf, [RAMWeigher(conf)], zero, spec()) == ([0.0, 0.0], [0.0, 0.0])
    same = [host("a", hypervisor_version=7), host("b", hypervisor_version=7)]
    hv = HypervisorVersionWeigher(conf)
    assert _weights(conf, [hv], same, spec()) == ([0.0, 0.0], [0.0, 0.0])
    assert _weights(conf, [RAMWeigher(conf)], states[:1], spec()) == ([0.0], [0.0])


def test_io_ops_default_prefers_idle_hosts() -> None:
    conf = config()
    states = [host("a", num_io_ops=4), host("b", num_io_ops=0)]
    ref, fast = _weights(conf, [IoOpsWeigher(conf)], states, spec())
    assert ref == fast == [-1.0, 0.0]


def test_per_aggregate_override_in_fast_path() -> None:
    conf = config()
    aggs = [
        agg(("a",), ram_weight_multiplier="-1.0"),
        agg(("b", "c"), build_failure_weight_multiplier="2"),
    ]
    states = [
        host("a", free_ram_mb=100, aggregates=(aggs[0],)),
        host("b", free_ram_mb=50, failed_builds=1, aggregates=(aggs[1],)),
        host("c", free_ram_mb=25, failed_builds=0, aggregates=(aggs[1],)),
    ]
    ws: list[BaseHostWeigher] = [RAMWeigher(conf), BuildFailureWeigher(conf)]
    ref, fast = _weights(conf, ws, states, spec(), aggs)
    assert ref == fast
    assert fast == [-1.0, 0.5 - 2.0, 0.25]


def test_image_props_weigher_counts_shared_pairs_and_ratios() -> None:
    images = {
        "i1": {"os_distro": "ubuntu", "hw_disk_bus": "virtio"},
        "i2": {"os_distro": "ubuntu", "hw_disk_bus": "scsi"},
        "i3": {"os_distro": "fedora"},
    }
    h = host("h1", instances={"i1", "i2", "i3"}, extra={"instance_image_props": images})
    s = spec(
        image=ImageMeta(
            properties=ImageMetaProps(other={"os_distro": "ubuntu", "hw_disk_bus": "virtio"})
        )
    )
    w = ImagePropertiesWeigher(config(filter_scheduler={"image_props_weight_multiplier": 1.0}))
    assert w.weigh_states([h], s) == [3.0]  # ubuntu twice + virtio once
    w = ImagePropertiesWeigher(
        config(
            filter_scheduler={
                "image_props_weight_multiplier": 1.0,
                "image_props_weight_setting": ("os_distro=0.5",),
            }
        )
    )
    assert w.weigh_states([h], s) == [1.0]  # only os_distro counts, at 0.5 each
