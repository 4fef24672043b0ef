"""The allocation-candidates query string for every extra-spec form, against nova's output."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import unquote

import pytest

from asyncsched.conf.options import Config, SchedulerOptions
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import (
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
)
from asyncsched.placement.query import build_resource_request, from_request_spec

CONFIG = Config()


def spec(
    extra: Mapping[str, str] | None = None,
    *,
    vcpus: int = 1,
    memory_mb: int = 2048,
    root_gb: int = 20,
    ephemeral_gb: int = 0,
    swap: int = 0,
    props: ImageMetaProps | None = None,
    **kw: Any,
) -> RequestSpec:
    flavor = Flavor(
        memory_mb=memory_mb,
        vcpus=vcpus,
        root_gb=root_gb,
        ephemeral_gb=ephemeral_gb,
        swap=swap,
        name="f",
        extra_specs=dict(extra or {}),
    )
    image = ImageMeta(properties=props) if props is not None else None
    return RequestSpec(flavor=flavor, image=image, **kw)


def qs(
    s: RequestSpec,
    *,
    pin: bool = True,
    nodes: Mapping[tuple[str | None, str | None], Sequence[str]] | None = None,
    config: Config = CONFIG,
) -> str:
    def nodes_for(host: str | None, node: str | None) -> Sequence[str]:
        return (nodes or {}).get((host, node), [])

    rr = build_resource_request(s, config, enable_pinning_translate=pin, nodes_for=nodes_for)
    return unquote(rr.to_querystring())


def test_plain_flavor_matches_reference_m1_small() -> None:
    assert qs(spec()) == "limit=1000&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"


def test_querystring_is_urlencoded_like_nova() -> None:
    rr = build_resource_request(spec(), CONFIG)
    assert rr.to_querystring() == "limit=1000&resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A1"


def test_reference_dedicated_example() -> None:
    s = spec(
        {
            "hw:cpu_policy": "dedicated",
            "resources:CUSTOM_FOO": "1",
            "resources1:VGPU": "1",
            "group_policy": "isolate",
            "trait:HW_CPU_X86_AVX2": "required",
        },
        requested_destination=Destination(
            aggregates=("agg-1,agg-2",), forbidden_aggregates=frozenset({"agg-3"})
        ),
        request_level_params=RequestLevelParams(
            root_forbidden=frozenset({"COMPUTE_STATUS_DISABLED"})
        ),
    )
    assert qs(s) == (
        "group_policy=isolate&limit=1000&member_of=!in:agg-3&member_of=in:agg-1,agg-2"
        "&required=HW_CPU_X86_AVX2&resources=CUSTOM_FOO:1,DISK_GB:20,MEMORY_MB:2048,PCPU:1"
        "&resources1=VGPU:1&root_required=!COMPUTE_STATUS_DISABLED"
    )
    assert build_resource_request(s, CONFIG).cpu_pinning_requested


def test_numbered_groups_traits_and_group_policy() -> None:
    s = spec(
        {
            "resources1:SRIOV_NET_VF": "1",
            "trait1:CUSTOM_PHYSNET_A": "required",
            "resources2:SRIOV_NET_VF": "1",
            "trait2:CUSTOM_PHYSNET_B": "forbidden",
            "group_policy": "none",
            "trait:HW_CPU_X86_AVX": "required",
            "trait:CUSTOM_NOPE": "forbidden",
        },
        vcpus=2,
        memory_mb=1024,
        root_gb=10,
    )
    assert qs(s) == (
        "group_policy=none&limit=1000&required=HW_CPU_X86_AVX,!CUSTOM_NOPE"
        "&required1=CUSTOM_PHYSNET_A&required2=!CUSTOM_PHYSNET_B"
        "&resources=DISK_GB:10,MEMORY_MB:1024,VCPU:2&resources1=SRIOV_NET_VF:1"
        "&resources2=SRIOV_NET_VF:1"
    )


def test_string_suffixes_and_flavor_overrides() -> None:
    s = spec(
        {
            "resources_GPU:VGPU": "2",
            "resources:VCPU": "0",
            "resources:DISK_GB": "0",
            "resources:MEMORY_MB": "4096",
            "resources:PCPU": "2",
        }
    )
    # VCPU/DISK_GB present (as 0) so the flavor's are not added, then zeros are stripped.
    assert qs(s) == "limit=1000&resources=MEMORY_MB:4096,PCPU:2&resources_GPU=VGPU:2"


def test_invalid_extra_specs_are_skipped_like_nova() -> None:
    s = spec(
        {
            "resources:NOT_A_CLASS": "1",
            "resources:CUSTOM_NEG": "-1",
            "resources:CUSTOM_NAN": "abc",
            "trait:CUSTOM_T": "optional",
            "group_policy": "bogus",
            "hw:cpu_policy": "shared",
            "resourcesX:": "1",
        }
    )
    assert qs(s) == "limit=1000&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"


@pytest.mark.parametrize(
    ("kw", "expected_disk"),
    [
        ({"root_gb": 20, "ephemeral_gb": 5, "swap": 1500}, "DISK_GB:27,"),
        ({"root_gb": 20, "ephemeral_gb": 0, "swap": 1024}, "DISK_GB:21,"),
        ({"root_gb": 20, "ephemeral_gb": 5, "swap": 1500, "is_bfv": True}, "DISK_GB:7,"),
        ({"root_gb": 20, "is_bfv": True}, ""),
        ({"root_gb": 0}, ""),
    ],
)
def test_disk_rules_swap_ephemeral_bfv(kw: dict[str, Any], expected_disk: str) -> None:
    is_bfv = kw.pop("is_bfv", False)
    assert qs(spec(**kw, is_bfv=is_bfv)) == (
        f"limit=1000&resources={expected_disk}MEMORY_MB:2048,VCPU:1"
    )


def test_image_traits_required_go_to_unsuffixed_group() -> None:
    props = ImageMetaProps(traits_required=frozenset({"HW_CPU_X86_SSE42", "CUSTOM_IMG"}))
    assert qs(spec(props=props)) == (
        "limit=1000&required=CUSTOM_IMG,HW_CPU_X86_SSE42&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"
    )


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"hw:cpu_policy": "dedicated"}, "PCPU:4"),
        ({"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"}, "PCPU:5"),
        ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0-1"}, "PCPU:2,VCPU:2"),
        ({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "3"}, "PCPU:1,VCPU:3"),
        (
            {
                "hw:cpu_policy": "mixed",
                "hw:cpu_dedicated_mask": "2-3",
                "hw:emulator_threads_policy": "isolate",
            },
            "PCPU:3,VCPU:2",
        ),
        (
            {"hw:cpu_policy": "mixed", "hw:cpu_realtime": "yes", "hw:cpu_realtime_mask": "^0"},
            "PCPU:3,VCPU:1",
        ),
    ],
)
def test_pinning_translation(extra: dict[str, str], expected: str) -> None:
    assert qs(spec(extra, vcpus=4)) == f"limit=1000&resources=DISK_GB:20,MEMORY_MB:2048,{expected}"


def test_image_cpu_policy_dedicated_is_translated() -> None:
    props = ImageMetaProps(hw_cpu_policy="dedicated", hw_cpu_thread_policy="require")
    assert qs(spec(vcpus=2, props=props)) == (
        "limit=1000&required=HW_CPU_HYPERTHREADING&resources=DISK_GB:20,MEMORY_MB:2048,PCPU:2"
    )


def test_thread_policy_isolate_forbids_hyperthreading() -> None:
    s = spec({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}, vcpus=2)
    assert qs(s) == (
        "limit=1000&required=!HW_CPU_HYPERTHREADING&resources=DISK_GB:20,MEMORY_MB:2048,PCPU:2"
    )


def test_vcpu_fallback_query_without_translation() -> None:
    s = spec({"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"}, vcpus=2)
    rr = build_resource_request(s, CONFIG, enable_pinning_translate=False)
    assert unquote(rr.to_querystring()) == "limit=1000&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:2"
    assert not rr.cpu_pinning_requested


def test_conflicting_cpu_policy_is_no_valid_host_not_a_crash() -> None:
    s = spec({"hw:cpu_policy": "shared"}, props=ImageMetaProps(hw_cpu_policy="dedicated"))
    with pytest.raises(NoValidHost):
        qs(s)


def test_requested_resources_groups_and_forced_group_policy() -> None:
    port = RequestGroup(
        requester_id="port-a",
        resources={"NET_BW_EGR_KILOBIT_PER_SEC": 1000},
        required_traits=frozenset({"CUSTOM_PHYSNET_NET1", "CUSTOM_VNIC_TYPE_NORMAL"}),
    )
    s = spec({"resources1:VGPU": "1"}, requested_resources=(port,))
    assert qs(s) == (
        "group_policy=none&limit=1000&required"
        "port-a=CUSTOM_PHYSNET_NET1,CUSTOM_VNIC_TYPE_NORMAL"
        "&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1&resources1=VGPU:1"
        "&resourcesport-a=NET_BW_EGR_KILOBIT_PER_SEC:1000"
    )


def test_two_flavor_groups_without_policy_are_not_forced() -> None:
    s = spec({"resources1:VGPU": "1", "resources2:VGPU": "1"})
    assert "group_policy" not in qs(s)


def test_requested_group_suffix_conflict_is_no_valid_host() -> None:
    s = spec(
        {"resources1:VGPU": "1"},
        requested_resources=(RequestGroup(requester_id="1", resources={"VGPU": 1}),),
    )
    with pytest.raises(NoValidHost, match="Duplicate request group suffix 1"):
        qs(s)


def test_root_required_forbidden_and_same_subtree() -> None:
    s = spec(
        request_level_params=RequestLevelParams(
            root_required=frozenset({"OWNER_NOVA", "COMPUTE_IMAGE_TYPE_QCOW2"}),
            root_forbidden=frozenset({"COMPUTE_STATUS_DISABLED"}),
            same_subtree=(("_NIC", "_BW"), ("_X",)),
        )
    )
    assert qs(s) == (
        "limit=1000&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"
        "&root_required=COMPUTE_IMAGE_TYPE_QCOW2,OWNER_NOVA,!COMPUTE_STATUS_DISABLED"
        "&same_subtree=_BW,_NIC&same_subtree=_X"
    )


def test_member_of_several_or_sets_and_forbidden() -> None:
    s = spec(
        requested_destination=Destination(
            aggregates=("b2,b1", "a1"), forbidden_aggregates=frozenset({"z", "y"})
        )
    )
    assert qs(s) == (
        "limit=1000&member_of=!in:y,z&member_of=in:a1&member_of=in:b1,b2"
        "&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"
    )


def test_in_tree_for_requested_destination() -> None:
    s = spec(requested_destination=Destination(host="h1"))
    assert qs(s, nodes={("h1", None): ["node-uuid-1"]}) == (
        "in_tree=node-uuid-1&limit=1000&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"
    )


def test_force_hosts_and_nodes_are_used_when_no_destination() -> None:
    s = spec(force_hosts=("h2",), force_nodes=("n2",))
    assert qs(s, nodes={("h2", "n2"): ["u2"]}).startswith("in_tree=u2&limit=1000")


def test_multi_node_host_removes_limit() -> None:
    s = spec(force_hosts=("ironic",))
    assert qs(s, nodes={("ironic", None): ["u1", "u2"]}) == (
        "resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"
    )


def test_unknown_host_is_no_valid_host_with_nova_reason() -> None:
    s = spec(requested_destination=Destination(host="ghost"))
    with pytest.raises(NoValidHost) as err:
        qs(s)
    assert err.value.reason == "No such host - host: ghost node: None "


@pytest.mark.parametrize("hint", ["group", "same_host", "different_host"])
def test_affinity_hints_remove_limit(hint: str) -> None:
    s = spec(scheduler_hints={hint: ("x",)})
    assert qs(s) == "resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"


def test_other_hints_keep_limit_and_limit_follows_config() -> None:
    cfg = Config(scheduler=SchedulerOptions(max_placement_results=7))
    assert qs(spec(scheduler_hints={"query": ("x",)}), config=cfg).startswith("limit=7&")


def test_memory_encryption() -> None:
    assert qs(spec({"hw:mem_encryption": "True"})) == (
        "limit=1000&required=HW_CPU_X86_AMD_SEV"
        "&resources=DISK_GB:20,MEMORY_MB:2048,MEM_ENCRYPTION_CONTEXT:1,VCPU:1"
    )
    props = ImageMetaProps(hw_mem_encryption=True, other={"hw_mem_encryption_model": "amd-sev-es"})
    assert "required=HW_CPU_X86_AMD_SEV_ES&" in qs(spec(props=props))


def test_vtpm_secure_boot_maxphysaddr_pci_socket_stateless() -> None:
    s = spec(
        {
            "hw:tpm_version": "2.0",
            "hw:tpm_model": "tpm-crb",
            "os:secure_boot": "required",
            "hw:maxphysaddr_mode": "emulate",
            "hw:pci_numa_affinity_policy": "socket",
        },
        props=ImageMetaProps(hw_firmware_type="uefi", other={"hw_firmware_stateless": True}),
    )
    assert qs(s) == (
        "limit=1000&required=COMPUTE_ADDRESS_SPACE_EMULATED,COMPUTE_SECURITY_STATELESS_FIRMWARE,"
        "COMPUTE_SECURITY_TPM_2_0,COMPUTE_SECURITY_TPM_CRB,COMPUTE_SECURITY_UEFI_SECURE_BOOT,"
        "COMPUTE_SOCKET_PCI_NUMA_AFFINITY&resources=DISK_GB:20,MEMORY_MB:2048,VCPU:1"
    )


def test_vtpm_defaults_to_tis_and_image_version() -> None:
    s = spec(props=ImageMetaProps(hw_tpm_version="1.2"))
    assert "required=COMPUTE_SECURITY_TPM_1_2,COMPUTE_SECURITY_TPM_TIS&" in qs(s)


def test_vpmem_namespaces() -> None:
    s = spec({"hw:pmem": "4GB, 4GB,small"})
    assert qs(s) == (
        "limit=1000&resources=CUSTOM_PMEM_NAMESPACE_4GB:2,CUSTOM_PMEM_NAMESPACE_SMALL:1,"
        "DISK_GB:20,MEMORY_MB:2048,VCPU:1"
    )


def test_resource_request_helpers() -> None:
    s = spec({"resources1:VGPU": "1", "trait1:CUSTOM_G": "required", "trait:CUSTOM_R": "required"})
    rr = from_request_spec(s)
    assert rr.merged_resources() == {"VGPU": 1, "VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}
    assert rr.all_required_traits == {"CUSTOM_G", "CUSTOM_R"}
    assert rr.num_suffixed_groups == 1 and rr.suffixed_groups_from_flavor == 1
    group = rr.get_group("1")
    assert group is not None and group.use_same_provider and group.resources == {"VGPU": 1}
    unsuffixed = rr.get_group(None)
    assert unsuffixed is not None and not unsuffixed.use_same_provider
