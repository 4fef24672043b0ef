"""ImagePropertiesWeigher parity with nova, and the image-metadata parsing it relies on.

nova scores a host by the (property, value) pairs of the requested image that the host's
instances' images share, counted per instance (optionally scaled per property by
``image_props_weight_setting``), comparing ``str()`` of ImageMetaProps' typed values. The
instances' side is built from ``instance_system_metadata`` rows (``image_<name>`` keys), as
``ImageMeta.from_instance`` does.
"""

from __future__ import annotations

from typing import Any

import pytest

from asyncsched.objects.image_props import canonical_image_props
from asyncsched.objects.models import ImageMeta, ImageMetaProps
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.weighers.image_props import ImagePropertiesWeigher, parse_ratios
from asyncsched.state.host_state import HostState
from asyncsched.state.rows import (
    IMAGE_PROP_COUNTS_KEY,
    IMAGE_PROPS_KEY,
    image_prop_counts,
    image_props_from_system_metadata,
    image_props_wanted,
)
from tests.support.sched_helpers import agg, config, host, spec

# ---- system metadata -> nova's ImageMetaProps.to_dict(), stringified ---------------------

SYSMETA: list[tuple[str, dict[str, str | None], dict[str, str]]] = [
    (
        "prefix stripped; non-image keys, image-level keys and unknown glance props dropped",
        {
            "image_os_distro": "ubuntu",
            "image_hw_disk_bus": "virtio",
            "owner_user_name": "demo",
            "boot_roles": "member",
            "image_min_ram": "512",
            "image_min_disk": "1",
            "image_disk_format": "qcow2",
            "image_container_format": "bare",
            "image_base_image_ref": "0b7c",
            "image_os_hash_value": "abc",
            "image_owner_specified.openstack.md5": "x",
            "image_hw_os_type": "linux",
        },
        {"os_distro": "ubuntu", "hw_disk_bus": "virtio"},
    ),
    ("NULL values are skipped", {"image_os_distro": None}, {}),
    (
        "booleans coerce like oslo's FlexibleBoolean",
        {
            "image_os_require_quiesce": "yes",
            "image_hw_qemu_guest_agent": "true",
            "image_hw_boot_menu": "0",
            "image_img_hide_hypervisor_id": "banana",
        },
        {
            "os_require_quiesce": "True",
            "hw_qemu_guest_agent": "True",
            "hw_boot_menu": "False",
            "img_hide_hypervisor_id": "False",
        },
    ),
    (
        "integers coerce; one nova could not coerce is left out",
        {"image_hw_numa_nodes": "2", "image_hw_video_ram": " 64", "image_hw_cpu_cores": "two"},
        {"hw_numa_nodes": "2", "hw_video_ram": "64"},
    ),
    (
        "enums nova canonicalises",
        {
            "image_hw_architecture": "AMD64",
            "image_img_hv_type": "xapi",
            "image_hw_vm_mode": "hv",
            "image_os_type": "Linux",
            "image_hw_vif_model": "VirtualE1000",
            "image_hw_scsi_model": "lsiLogicSAS",
        },
        {
            "hw_architecture": "x86_64",
            "img_hv_type": "xen",
            "hw_vm_mode": "hvm",
            "os_type": "linux",
            "hw_vif_model": "e1000",
            "hw_scsi_model": "lsisas1068",
        },
    ),
    (
        "legacy names map; the current name wins when both are set",
        {
            "image_architecture": "i386",
            "image_hypervisor_type": "qemu",
            "image_vm_mode": "hvm",
            "image_vmware_ostype": "otherGuest",
            "image_os_distro": "fedora",
            "image_auto_disk_config": "False",
        },
        {
            "hw_architecture": "i686",
            "img_hv_type": "qemu",
            "hw_vm_mode": "hvm",
            "os_distro": "fedora",
            "hw_auto_disk_config": "False",
        },
    ),
    (
        "vmware_adaptertype ide",
        {"image_vmware_adaptertype": "ide"},
        {"hw_disk_bus": "ide"},
    ),
    (
        "vmware_adaptertype scsi model",
        {"image_vmware_adaptertype": "paravirtual"},
        {"hw_disk_bus": "scsi", "hw_scsi_model": "vmpvscsi"},
    ),
    (
        "hw_numa_cpus.N / hw_numa_mem.N fold into lists, stopping at the first gap",
        {
            "image_hw_numa_cpus.0": "0-1",
            "image_hw_numa_cpus.1": "3,2",
            "image_hw_numa_cpus.3": "7",
            "image_hw_numa_mem.0": "1024",
            "image_hw_numa_mem.1": "2048",
        },
        {"hw_numa_cpus": "[{0, 1}, {2, 3}]", "hw_numa_mem": "[1024, 2048]"},
    ),
    (
        "trait:X=required becomes traits_required (sorted); other values do not",
        {
            "image_trait:HW_CPU_X86_AVX2": "required",
            "image_trait:CUSTOM_B": "required",
            "image_trait:CUSTOM_C": "forbidden",
        },
        {"traits_required": "['CUSTOM_B', 'HW_CPU_X86_AVX2']"},
    ),
    (
        "block device mappings are never image properties",
        {"image_mappings": "[]", "image_block_device_mapping": "[]", "image_bdm_v2": "True"},
        {"img_bdm_v2": "True"},
    ),
]


@pytest.mark.parametrize(("why", "rows", "expected"), SYSMETA, ids=[t[0] for t in SYSMETA])
def test_image_props_from_system_metadata(
    why: str, rows: dict[str, str | None], expected: dict[str, str]
) -> None:
    assert image_props_from_system_metadata(rows.items()) == expected


def test_request_side_and_instance_side_stringify_alike() -> None:
    """The request's typed values (as nova's object carries them on the wire) and the same
    image's system-metadata strings give the same pairs."""
    request = ImageMetaProps(
        hw_numa_nodes=2,
        hw_mem_encryption=True,
        hw_architecture="x86_64",
        traits_required=frozenset({"HW_CPU_X86_AVX2", "CUSTOM_B"}),
        other={
            "os_require_quiesce": True,
            "hw_numa_cpus": [[1, 0], [2, 3]],
            "hw_numa_mem": [1024, 2048],
            "os_distro": "ubuntu",
        },
    )
    sysmeta = {
        "image_hw_numa_nodes": "2",
        "image_hw_mem_encryption": "true",
        "image_architecture": "amd64",
        "image_trait:HW_CPU_X86_AVX2": "required",
        "image_trait:CUSTOM_B": "required",
        "image_os_require_quiesce": "True",
        "image_hw_numa_cpus.0": "0-1",
        "image_hw_numa_cpus.1": "2-3",
        "image_hw_numa_mem.0": "1024",
        "image_hw_numa_mem.1": "2048",
        "image_os_distro": "ubuntu",
    }
    wanted = canonical_image_props(dict(request.items()), keep_unknown=True)
    assert wanted == image_props_from_system_metadata(sysmeta.items())
    assert wanted["hw_mem_encryption"] == "True" and wanted["hw_numa_nodes"] == "2"


def test_request_side_keeps_fields_newer_than_ours() -> None:
    """A request's property we do not know is a newer nova field: nova compares it too."""
    props = {"hw_future_knob": "on", "hw_disk_bus": "virtio"}
    assert canonical_image_props(props, keep_unknown=True) == props
    assert canonical_image_props(props, keep_unknown=False) == {"hw_disk_bus": "virtio"}


# ---- the weigher -----------------------------------------------------------------------------

IMAGES = {
    "i1": {"os_distro": "ubuntu", "hw_disk_bus": "virtio"},
    "i2": {"os_distro": "ubuntu", "hw_disk_bus": "scsi"},
    "i3": {"os_distro": "fedora"},
}
UBUNTU_VIRTIO = {"os_distro": "ubuntu", "hw_disk_bus": "virtio"}


def image(**props: Any) -> ImageMeta:
    return ImageMeta(properties=ImageMetaProps(other=props))


def cached(name: str, images: dict[str, dict[str, str]], **kw: Any) -> HostState:
    """A host shaped as the host-state cache leaves it (props + precomputed counts)."""
    insts = set(kw.pop("instances", images))
    known = {u: p for u, p in images.items() if u in insts}
    extra = {IMAGE_PROPS_KEY: known, IMAGE_PROP_COUNTS_KEY: image_prop_counts(known, known)}
    return host(name, instances=insts, extra=extra, **kw)


def raw(name: str, images: dict[str, dict[str, str]], **kw: Any) -> HostState:
    """A host with only the props map (the weigher counts it itself)."""
    insts = set(kw.pop("instances", images))
    return host(name, instances=insts, extra={IMAGE_PROPS_KEY: images}, **kw)


# (why, filter_scheduler options, host images, instances on the host or None = all,
#  requested image props, expected raw score)
WEIGH: list[
    tuple[str, dict[str, Any], dict[str, dict[str, str]], set[str] | None, dict[str, Any], float]
] = [
    ("off by default", {}, IMAGES, None, UBUNTU_VIRTIO, 0.0),
    (
        "shared pairs counted per instance",
        {"image_props_weight_multiplier": 1.0},
        IMAGES,
        None,
        UBUNTU_VIRTIO,
        3.0,
    ),
    (
        "negative multiplier: raw score unchanged",
        {"image_props_weight_multiplier": -2.0},
        IMAGES,
        None,
        UBUNTU_VIRTIO,
        3.0,
    ),
    ("no image on the request", {"image_props_weight_multiplier": 1.0}, IMAGES, None, {}, 0.0),
    (
        "instances without image metadata",
        {"image_props_weight_multiplier": 1.0},
        {},
        {"i9"},
        UBUNTU_VIRTIO,
        0.0,
    ),
    (
        "a pair must match value too",
        {"image_props_weight_multiplier": 1.0},
        IMAGES,
        None,
        {"os_distro": "debian", "hw_disk_bus": "ide"},
        0.0,
    ),
    (
        "only the host's instances count",
        {"image_props_weight_multiplier": 1.0},
        IMAGES,
        {"i3"},
        UBUNTU_VIRTIO,
        0.0,
    ),
    (
        "ratios: named props only",
        {"image_props_weight_multiplier": 1.0, "image_props_weight_setting": ("os_distro=0.5",)},
        IMAGES,
        None,
        UBUNTU_VIRTIO,
        1.0,
    ),
    (
        "ratios: two props",
        {
            "image_props_weight_multiplier": 1.0,
            "image_props_weight_setting": ("os_distro=0.5", "hw_disk_bus=10"),
        },
        IMAGES,
        None,
        UBUNTU_VIRTIO,
        11.0,
    ),
    (
        "ratios: all invalid -> counted evenly",
        {
            "image_props_weight_multiplier": 1.0,
            "image_props_weight_setting": ("os_distro", "=2", "hw_disk_bus=x"),
        },
        IMAGES,
        None,
        UBUNTU_VIRTIO,
        3.0,
    ),
    (
        "ratios: key taken as written (nova does not strip it)",
        {"image_props_weight_multiplier": 1.0, "image_props_weight_setting": ("os_distro =1",)},
        IMAGES,
        None,
        UBUNTU_VIRTIO,
        0.0,
    ),
    (
        "typed request values compare as nova's str()",
        {"image_props_weight_multiplier": 1.0},
        {"i1": {"os_require_quiesce": "True", "hw_numa_nodes": "2"}},
        None,
        {"os_require_quiesce": True, "hw_numa_nodes": 2},
        2.0,
    ),
]


@pytest.mark.parametrize(
    ("why", "fs", "images", "instances", "wanted", "expected"), WEIGH, ids=[t[0] for t in WEIGH]
)
def test_weigher_raw_scores(
    why: str,
    fs: dict[str, Any],
    images: dict[str, dict[str, str]],
    instances: set[str] | None,
    wanted: dict[str, Any],
    expected: float,
) -> None:
    w = ImagePropertiesWeigher(config(filter_scheduler=fs))
    s = spec(image=image(**wanted) if wanted else None)
    kw: dict[str, Any] = {} if instances is None else {"instances": instances}
    for h in (cached("h1", images, **kw), raw("h1", images, **kw)):
        assert w.weigh_states([h], s) == [expected]
        assert w.weigh(HostCandidate(h), s) == expected


def test_parse_ratios_matches_nova_parse_options() -> None:
    assert parse_ratios(("a=1", "b=0.5", "c", "=3", "d=x", " e=2")) == {
        "a": 1.0,
        "b": 0.5,
        " e": 2.0,
    }


def test_engine_packs_or_spreads_by_multiplier_sign() -> None:
    a = cached("a", {"i1": UBUNTU_VIRTIO, "i2": UBUNTU_VIRTIO})  # raw 4
    b = cached("b", {"i3": {"os_distro": "ubuntu"}})  # raw 1
    c = cached("c", {})  # raw 0
    s = spec(image=image(**UBUNTU_VIRTIO))
    for mult in (1.0, -1.0):
        conf = config(filter_scheduler={"image_props_weight_multiplier": mult})
        eng = DecisionEngine(conf, [], [ImagePropertiesWeigher(conf)])
        assert eng.start([a, b, c]).weigh(s).tolist() == [mult * 1.0, mult * 0.25, 0.0]


def test_config_zero_ignores_aggregate_override_like_nova() -> None:
    """nova's weigher returns 0 when the config multiplier is 0, whatever the aggregates."""
    override = agg(("a",), image_props_weight_multiplier="5")
    a = cached("a", {"i1": UBUNTU_VIRTIO}, aggregates=(override,))
    b = cached("b", {})
    conf = config()
    eng = DecisionEngine(conf, [], [ImagePropertiesWeigher(conf)])
    eng.set_aggregates([override])
    assert eng.start([a, b]).weigh(spec(image=image(**UBUNTU_VIRTIO))).tolist() == [0.0, 0.0]


def test_aggregate_override_scales_when_config_on() -> None:
    override = agg(("a",), image_props_weight_multiplier="5")
    a = cached("a", {"i1": UBUNTU_VIRTIO}, aggregates=(override,))
    b = cached("b", {})
    conf = config(filter_scheduler={"image_props_weight_multiplier": 1.0})
    eng = DecisionEngine(conf, [], [ImagePropertiesWeigher(conf)])
    eng.set_aggregates([override])
    assert eng.start([a, b]).weigh(spec(image=image(**UBUNTU_VIRTIO))).tolist() == [5.0, 0.0]


WANTED: list[tuple[dict[str, Any], bool]] = [
    ({}, False),
    ({"image_props_weight_multiplier": 1.0}, True),
    ({"image_props_weight_multiplier": -0.5}, True),
    ({"image_props_weight_multiplier": 1.0, "weight_classes": ("RAMWeigher",)}, False),
    (
        {"image_props_weight_multiplier": 1.0, "weight_classes": ("ImagePropertiesWeigher",)},
        True,
    ),
    (
        {
            "image_props_weight_multiplier": 1.0,
            "weight_classes": ("nova.scheduler.weights.image_props.ImagePropertiesWeigher",),
        },
        True,
    ),
    (
        {
            "image_props_weight_multiplier": 1.0,
            "weight_classes": ("asyncsched.scheduling.weighers.all_weighers",),
        },
        True,
    ),
]


@pytest.mark.parametrize(("fs", "expected"), WANTED)
def test_image_props_wanted(fs: dict[str, Any], expected: bool) -> None:
    assert image_props_wanted(config(filter_scheduler=fs)) is expected
