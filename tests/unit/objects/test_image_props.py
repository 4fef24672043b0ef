"""asyncsched.objects.image_props: nova's ImageMetaProps naming and typing rules, once."""

from __future__ import annotations

import pytest

from asyncsched.objects import image_props as rules
from asyncsched.objects.models import ImageMetaProps

# nova 34, nova/objects/image_meta.py ImageMetaProps._legacy_property_map.
NOVA_LEGACY_MAP = {
    "architecture": "hw_architecture",
    "owner_id": "img_owner_id",
    "vmware_disktype": "hw_disk_type",
    "vmware_image_version": "img_version",
    "vmware_ostype": "os_distro",
    "auto_disk_config": "hw_auto_disk_config",
    "ipxe_boot": "hw_ipxe_boot",
    "xenapi_device_id": "hw_device_id",
    "xenapi_image_compression_level": "img_compression_level",
    "vmware_linked_clone": "img_linked_clone",
    "xenapi_use_agent": "img_use_agent",
    "xenapi_skip_agent_inject_ssh": "os_skip_agent_inject_ssh",
    "xenapi_skip_agent_inject_files_at_boot": "os_skip_agent_inject_files_at_boot",
    "cache_in_nova": "img_cache_in_nova",
    "vm_mode": "hw_vm_mode",
    "bittorrent": "img_bittorrent",
    "mappings": "img_mappings",
    "block_device_mapping": "img_block_device_mapping",
    "bdm_v2": "img_bdm_v2",
    "root_device_name": "img_root_device_name",
    "hypervisor_version_requires": "img_hv_requested_version",
    "hypervisor_type": "img_hv_type",
}


def test_legacy_map_is_novas() -> None:
    assert dict(rules.LEGACY_IMAGE_PROPS) == NOVA_LEGACY_MAP


def test_every_legacy_target_is_a_field_or_a_bdm_list() -> None:
    for target in rules.LEGACY_IMAGE_PROPS.values():
        assert target in rules.IMAGE_PROP_FIELDS or target in rules.BDM_FIELDS, target


def test_every_typed_model_field_has_a_scalar_kind() -> None:
    # hw_emulator_threads_policy is no ImageMetaProps field in nova (only a flavor extra spec);
    # our model carries it as a plain string.
    skip = ("other", "traits_required", "hw_emulator_threads_policy")
    typed = [n for n in ImageMetaProps.__dataclass_fields__ if n not in skip]
    assert rules.field_kind("hw_emulator_threads_policy") is None
    for name in typed:
        assert rules.field_kind(name) in ("bool", "int", "str", "canonical"), name
    assert rules.field_kind("traits_required") == "list"
    assert rules.field_kind("hw_numa_nodes") == "int"
    assert rules.field_kind("hw_mem_encryption") == "bool"
    assert rules.field_kind("hw_architecture") == "canonical"
    assert rules.field_kind("no_such_prop") is None


def test_from_legacy_names_maps_and_splits_the_vmware_adapter() -> None:
    got = rules.from_legacy_names(
        {"architecture": "x86_64", "owner_id": "o", "vmware_adaptertype": "lsiLogic", "x": 1}
    )
    assert got == {
        "hw_architecture": "x86_64",
        "img_owner_id": "o",
        "hw_disk_bus": "scsi",
        "hw_scsi_model": "lsiLogic",
    }
    assert rules.from_legacy_names({"vmware_adaptertype": "ide"}) == {"hw_disk_bus": "ide"}
    assert rules.from_legacy_names({"vmware_adaptertype": ""}) == {}


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("trait:CUSTOM_A", "required", True),
        ("trait:CUSTOM_A", "Required", False),  # nova compares str(v) == 'required' exactly
        ("trait:CUSTOM_A", " required", False),
        ("trait:CUSTOM_A", "forbidden", False),
        ("CUSTOM_A", "required", False),
    ],
)
def test_required_trait_is_novas_exact_match(key: str, value: str, expected: bool) -> None:
    assert rules.is_required_trait(key, value) is expected


def test_numa_cell_values_stop_at_the_first_gap() -> None:
    props = {"hw_numa_cpus.0": "0-1", "hw_numa_cpus.1": "2", "hw_numa_cpus.3": "9"}
    assert rules.numa_cell_values(props, "hw_numa_cpus") == ["0-1", "2"]
    assert rules.numa_cell_values(props, "hw_numa_mem") == []


def test_canonical_props_current_name_beats_legacy_and_bdm_lists_drop() -> None:
    got = rules.canonical_image_props(
        {
            "architecture": "i386",
            "hw_architecture": "amd64",
            "mappings": "[]",
            "hw_numa_cpus.0": "0-1,^1",
            "trait:CUSTOM_B": "required",
        },
        keep_unknown=False,
    )
    assert got == {
        "hw_architecture": "x86_64",
        "hw_numa_cpus": "[{0}]",
        "traits_required": "['CUSTOM_B']",
    }
