"""nova's image-property rules, written once: field names, legacy names, value types.

nova turns glance's property dict into ``ImageMetaProps`` with ``from_dict`` (legacy names
first, current names override them, ``vmware_adaptertype`` split into disk bus and SCSI model,
``hw_numa_cpus.N``/``hw_numa_mem.N`` folded into lists, ``trait:X=required`` into
``traits_required``) and coerces each value to its field's type. The codec (requests), the
host-state rows (instance system metadata) and ImagePropertiesWeigher all read image
properties through this module, so they cannot disagree on a name or a type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

from asyncsched.common.strings import bool_from_string
from asyncsched.objects.cpu_spec import parse_cpu_spec

NUMA_NODES_MAX = 128

# ImageMetaProps fields (nova 1.43) by how their value is coerced.
_BOOL_PROPS = frozenset(
    {
        "hw_boot_menu",
        "hw_firmware_stateless",
        "hw_ipxe_boot",
        "hw_locked_memory",
        "hw_mem_encryption",
        "hw_pmu",
        "hw_qemu_guest_agent",
        "hw_time_hpet",
        "hw_vif_multiqueue_enabled",
        "hw_ephemeral_encryption",
        "hw_virtio_packed_ring",
        "img_bittorrent",
        "img_bdm_v2",
        "img_cache_in_nova",
        "img_linked_clone",
        "img_use_agent",
        "img_hide_hypervisor_id",
        "os_require_quiesce",
        "os_skip_agent_inject_files_at_boot",
        "os_skip_agent_inject_ssh",
    }
)
_INT_PROPS = frozenset(
    {
        "hw_cpu_cores",
        "hw_cpu_sockets",
        "hw_cpu_max_cores",
        "hw_cpu_max_sockets",
        "hw_cpu_max_threads",
        "hw_cpu_threads",
        "hw_device_id",
        "hw_numa_nodes",
        "hw_serial_port_count",
        "hw_video_ram",
        "hw_maxphysaddr_bits",
        "hw_redirected_usb_ports",
        "img_compression_level",
        "img_version",
    }
)
_STR_PROPS = frozenset(
    {
        # plain strings, UUIDs, version predicates and enums nova only validates
        "hw_auto_disk_config",
        "hw_cpu_realtime_mask",
        "hw_disk_type",
        "hw_machine_type",
        "hw_mem_page_size",
        "img_owner_id",
        "img_root_device_name",
        "img_signature",
        "os_admin_user",
        "os_command_line",
        "os_distro",
        "hw_ephemeral_encryption_secret_uuid",
        "img_signature_certificate_uuid",
        "img_hv_requested_version",
        "hw_ephemeral_encryption_format",
        "hw_rescue_device",
        "hw_cpu_policy",
        "hw_cpu_thread_policy",
        "img_config_drive",
        "hw_cdrom_bus",
        "hw_disk_bus",
        "hw_floppy_bus",
        "hw_rescue_bus",
        "hw_firmware_type",
        "img_signature_hash_method",
        "img_signature_key_type",
        "hw_input_bus",
        "hw_maxphysaddr_mode",
        "hw_mem_encryption_model",
        "hw_pci_numa_affinity_policy",
        "hw_pointer_model",
        "hw_rng_model",
        "os_secure_boot",
        "hw_sound_model",
        "hw_tpm_model",
        "hw_tpm_version",
        "hw_usb_model",
        "hw_viommu_model",
        "hw_video_model",
        "hw_watchdog_action",
    }
)
_CANONICAL_PROPS = frozenset(
    {
        "hw_architecture",
        "hw_emulation_architecture",
        "img_hv_type",
        "hw_vm_mode",
        "os_type",
        "hw_scsi_model",
        "hw_vif_model",
    }
)
_LIST_PROPS = frozenset({"hw_numa_cpus", "hw_numa_mem", "traits_required"})
#: Every ImageMetaProps field an instance's system metadata can give (not the two
#: block-device-mapping lists nova never stores there).
IMAGE_PROP_FIELDS = _BOOL_PROPS | _INT_PROPS | _STR_PROPS | _CANONICAL_PROPS | _LIST_PROPS

#: ImageMetaProps._legacy_property_map (glance's older names -> field names)
LEGACY_IMAGE_PROPS: Mapping[str, str] = {
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
#: The legacy VMware key ``from_dict`` splits into hw_disk_bus (+ hw_scsi_model).
VMWARE_ADAPTER_TYPE = "vmware_adaptertype"
#: Block-device-mapping fields nova never keeps in image properties it stores or compares.
BDM_FIELDS = frozenset({"img_mappings", "img_block_device_mapping"})
TRAIT_PREFIX = "trait:"

Kind = Literal["bool", "int", "str", "canonical", "list"]


def field_kind(name: str) -> Kind | None:
    """How nova coerces the ImageMetaProps field ``name``; None for a name it does not know."""
    if name in _BOOL_PROPS:
        return "bool"
    if name in _INT_PROPS:
        return "int"
    if name in _STR_PROPS:
        return "str"
    if name in _CANONICAL_PROPS:
        return "canonical"
    if name in _LIST_PROPS:
        return "list"
    return None


def from_legacy_names(props: Mapping[str, Any]) -> dict[str, Any]:
    """nova's ``_set_attr_from_legacy_names``: field name -> value for the legacy keys set."""
    fields = {new: props[old] for old, new in LEGACY_IMAGE_PROPS.items() if old in props}
    adapter = props.get(VMWARE_ADAPTER_TYPE)
    if adapter == "ide":
        fields["hw_disk_bus"] = "ide"
    elif adapter:
        fields["hw_disk_bus"] = "scsi"
        fields["hw_scsi_model"] = adapter
    return fields


def is_required_trait(key: str, value: Any) -> bool:
    """nova's ``_set_attr_from_trait_names``: ``trait:X`` whose value is exactly 'required'."""
    return key.startswith(TRAIT_PREFIX) and str(value) == "required"


def numa_cell_values(props: Mapping[str, Any], name: str) -> list[Any]:
    """``name.0``, ``name.1``, ... up to the first gap, as nova folds hw_numa_cpus/hw_numa_mem."""
    values: list[Any] = []
    for cell in range(NUMA_NODES_MAX):
        key = f"{name}.{cell}"
        if key not in props:
            break
        values.append(props[key])
    return values


_SCSI_LEGACY = {"lsilogicsas": "lsisas1068", "paravirtual": "vmpvscsi"}
_VIF_LEGACY = {
    "virtuale1000": "e1000",
    "virtuale1000e": "e1000e",
    "virtualpcnet32": "pcnet",
    "virtualsriovethernetcard": "sriov",
    "virtualvmxnet": "vmxnet",
    "virtualvmxnet3": "vmxnet3",
}


def _canonical_str(name: str, value: str) -> str:
    """The enum fields whose coerce() rewrites the value (nova.objects.fields)."""
    v = value.lower()
    if name in ("hw_architecture", "hw_emulation_architecture"):
        if v in ("i386", "i486", "i586", "x86_32", "x86_32p"):
            return "i686"
        return "x86_64" if v == "amd64" else v
    if name == "img_hv_type":
        return "xen" if v == "xapi" else v
    if name == "hw_vm_mode":
        return {"pv": "xen", "hv": "hvm", "baremetal": "hvm"}.get(v, v)
    if name == "hw_scsi_model":
        return _SCSI_LEGACY.get(v, v)
    if name == "hw_vif_model":
        return _VIF_LEGACY.get(v, v)
    return v  # os_type


def _set_str(cpus: Iterable[int]) -> str:
    """``str()`` of a set of small ints as Python prints it (ascending)."""
    members = sorted(cpus)
    return "{" + ", ".join(map(str, members)) + "}" if members else "set()"


def image_prop_str(name: str, value: Any) -> str | None:
    """``str()`` of the value nova's ImageMetaProps field ``name`` holds for ``value`` (a
    wire primitive or a system-metadata string); None when nova could not coerce it. Unknown
    names (newer nova fields) are ``str(value)``. List fields print in a stable order (traits
    sorted, CPU sets ascending) so the same image compares equal whatever order it came in."""
    if value is None:
        return None
    try:
        if name in _BOOL_PROPS:
            flag = bool_from_string(value)
            return str(flag)
        if name in _INT_PROPS:
            return str(int(value))
        if name in _CANONICAL_PROPS:
            return _canonical_str(name, str(value))
        if name == "traits_required":
            traits = [value] if isinstance(value, str) else list(value)
            return str(sorted(str(t) for t in traits))
        if name == "hw_numa_mem":
            if isinstance(value, str):  # nova only builds it from hw_numa_mem.N
                return None
            return str([int(x) for x in value])
        if name == "hw_numa_cpus":
            if isinstance(value, str):
                return None
            return "[" + ", ".join(_set_str(int(c) for c in cell) for cell in value) + "]"
    except (TypeError, ValueError):
        return None
    return str(value)


def canonical_image_props(props: Mapping[str, Any], *, keep_unknown: bool) -> dict[str, str]:
    """nova's ``ImageMetaProps.from_dict(props).to_dict()`` with each value as ``str()``.

    ``keep_unknown``: names that are not ImageMetaProps fields stay (as ``str(value)``): a
    request's properties come from nova's own object, so an unknown name is a newer field;
    system metadata holds every glance property, of which nova keeps only its fields.
    A value nova cannot coerce (``hw_numa_nodes=two``) is left out instead of failing.
    """
    typed = from_legacy_names(props)
    numa_cpus = numa_cell_values(props, "hw_numa_cpus")
    numa_mem = numa_cell_values(props, "hw_numa_mem")
    traits: list[str] = []
    unknown: dict[str, Any] = {}
    for key, value in props.items():
        if key in IMAGE_PROP_FIELDS:
            if key in ("hw_numa_cpus", "hw_numa_mem"):
                if isinstance(value, list | tuple):  # a request's typed value
                    typed[key] = value
            elif key == "traits_required":
                if not isinstance(value, str) and value is not None:
                    traits.extend(str(t) for t in value)
            else:
                typed[key] = value
        elif key.startswith(TRAIT_PREFIX):
            if is_required_trait(key, value):
                traits.append(key[len(TRAIT_PREFIX) :])
        elif keep_unknown and key not in LEGACY_IMAGE_PROPS and key != VMWARE_ADAPTER_TYPE:
            if not key.startswith(("hw_numa_cpus.", "hw_numa_mem.")) and value is not None:
                unknown[key] = value
    if numa_cpus:
        try:
            typed["hw_numa_cpus"] = [parse_cpu_spec(str(c)) for c in numa_cpus]
        except ValueError:
            typed.pop("hw_numa_cpus", None)
    if numa_mem:
        typed["hw_numa_mem"] = numa_mem
    if traits:
        typed["traits_required"] = traits
    for key in BDM_FIELDS:
        typed.pop(key, None)
    out = {k: str(v) for k, v in unknown.items()}
    for key, value in typed.items():
        text = image_prop_str(key, value)
        if text is not None:
            out[key] = text
    return out
