"""The nova object codec against primitives shaped like the real conductor's."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from asyncsched.objects import codec
from asyncsched.objects.codec import CodecError
from asyncsched.objects.models import (
    Aggregate,
    ImageMetaProps,
    NetworkMetadata,
    NUMATopologyLimits,
    SchedulerLimits,
    Selection,
)
from tests.support import nova_objects
from tests.support import nova_primitives as P
from tests.support.oslo_caller import request_spec as model_spec


def test_decodes_a_nova_34_boot_request() -> None:
    spec = codec.decode_request_spec(P.request_spec())
    assert spec.num_instances == 3
    assert spec.flavor.memory_mb == 4096 and spec.flavor.vcpus == 2 and spec.flavor.root_gb == 40
    assert spec.flavor.extra_specs["trait:HW_CPU_X86_AVX2"] == "required"
    assert spec.image is not None
    assert spec.image.properties.hw_architecture == "x86_64"
    assert spec.image.properties.img_hv_type == "kvm"
    # ImageMetaProps fields we do not type are kept, not lost.
    assert spec.image.properties.get("os_distro") == "ubuntu"
    assert spec.image.min_ram == 512 and spec.image.size == 612368384
    group = spec.instance_group
    assert group is not None
    assert group.uuid == P.GROUP_UUID and group.policy == "anti-affinity"
    assert group.policies == ("anti-affinity",)
    assert group.hosts == ("cn-00000",) and len(group.members) == 4
    assert group.max_server_per_host == 1
    assert spec.get_scheduler_hint("group") == P.GROUP_UUID
    assert spec.get_scheduler_hint("example_hint") == ["a", "b"]
    assert spec.network_metadata == NetworkMetadata(frozenset({"physnet1"}), True)
    assert spec.retry is not None and spec.retry.num_attempts == 1
    assert spec.limits == SchedulerLimits()
    assert spec.security_groups == ("default",)
    assert spec.instance_uuid == P.INSTANCE_UUIDS[0]
    assert spec.requested_destination is None
    assert spec.ignore_hosts is None and spec.force_hosts is None


def test_unset_fields_get_novas_defaults() -> None:
    minimal = P.obj("RequestSpec", "1.15", {"flavor": P.flavor()})
    spec = codec.decode_request_spec(minimal)
    assert spec.num_instances == 1
    assert spec.image is None and spec.instance_group is None
    assert spec.network_metadata == NetworkMetadata()
    assert spec.request_level_params.root_required == frozenset()
    assert spec.requested_resources == () and spec.scheduler_hints == {}
    assert spec.is_bfv is False


def nested_spec(**fields: Any) -> dict[str, Any]:
    """A RequestSpec primitive with every nested object: NUMA, PCI, destination, a group."""
    return P.request_spec(
        numa_topology=P.numa_topology(),
        pci_requests=P.pci_requests(),
        requested_destination=P.destination(),
        requested_resources=[P.request_group()],
        **fields,
    )


def test_nested_objects_numa_pci_destination_groups() -> None:
    params = {
        "root_required": ["COMPUTE_STATUS_ENABLED"],
        "root_forbidden": ["COMPUTE_STATUS_DISABLED"],
        "same_subtree": [["port-1", "port-2"]],
    }
    spec = codec.decode_request_spec(
        nested_spec(request_level_params=P.obj("RequestLevelParams", "1.1", params))
    )
    assert spec.numa_topology is not None
    cell = spec.numa_topology.cells[0]
    assert cell.pcpuset == frozenset({0, 1}) and cell.memory == 2048 and cell.pagesize == 2048
    assert cell.cpu_pinning == {0: 4, 1: 5}
    assert cell.cpu_topology is not None and cell.cpu_topology.cores == 2
    assert spec.pci_requests is not None
    req = spec.pci_requests.requests[0]
    assert req.count == 2 and req.spec[0]["vendor_id"] == "8086" and req.numa_policy == "preferred"
    dest = spec.requested_destination
    assert dest is not None and dest.host == "cn-00007"
    assert dest.cell is not None and dest.cell.name == "cell1"
    assert dest.aggregates == ("agg-1,agg-2", "agg-3")
    assert dest.forbidden_aggregates == frozenset({"agg-9"})
    group = spec.requested_resources[0]
    assert group.resources == {"CUSTOM_FPGA": 1} and group.aggregates == (("a1", "a2"),)
    assert group.requester_id == "port-1"
    assert spec.request_level_params.same_subtree == (("port-1", "port-2"),)
    assert spec.request_level_params.root_forbidden == frozenset({"COMPUTE_STATUS_DISABLED"})


def test_newer_minor_versions_and_unknown_fields_are_tolerated() -> None:
    prim = P.request_spec()
    prim["nova_object.version"] = "1.99"
    prim["nova_object.data"]["a_field_from_the_future"] = {"x": 1}
    prim["nova_object.data"]["flavor"]["nova_object.version"] = "1.7"
    prim["nova_object.data"]["image"]["nova_object.data"]["properties"]["nova_object.data"][
        "hw_new_thing"
    ] = "on"
    spec = codec.decode_request_spec(prim)
    assert spec.flavor.vcpus == 2
    assert spec.image is not None and spec.image.properties.get("hw_new_thing") == "on"


def test_plain_dict_spec_from_oslo_only_callers() -> None:
    # reference/samples/call.json: a spec_obj without nova_object wrappers.
    spec = codec.decode_request_spec(
        {
            "num_instances": 3,
            "flavor": {"name": "m1.small", "vcpus": 1, "memory_mb": 2048, "root_gb": 20},
            "image": {"properties": {"hw_architecture": "x86_64"}},
            "scheduler_hints": {"group": ["g1"]},
        }
    )
    assert spec.flavor.memory_mb == 2048 and spec.num_instances == 3
    assert spec.image is not None and spec.image.properties.hw_architecture == "x86_64"


def test_field_coercion_like_nova() -> None:
    spec = codec.decode_request_spec(
        P.request_spec(
            flavor=P.flavor(memory_mb="2048", disabled="false"),
            scheduler_hints={"target_cell": "cell1", "numbers": [1, 2]},
        )
    )
    assert spec.flavor.memory_mb == 2048 and spec.flavor.disabled is False
    assert spec.scheduler_hints["target_cell"] == ("cell1",)
    assert spec.scheduler_hints["numbers"] == ("1", "2")


@pytest.mark.parametrize(
    ("mutate", "path"),
    [
        (
            lambda p: p["nova_object.data"]["flavor"]["nova_object.data"].update(vcpus="two"),
            "vcpus",
        ),
        (lambda p: p["nova_object.data"].pop("flavor"), "flavor"),
        (lambda p: p["nova_object.data"].update(num_instances=[3]), "num_instances"),
        (lambda p: p["nova_object.data"].update(ignore_hosts="cn-1"), "ignore_hosts"),
        (lambda p: p["nova_object.data"].update(scheduler_hints=["x"]), "scheduler_hints"),
        (lambda p: p["nova_object.data"].update(image={"nova_object.name": "Bogus"}), "image"),
        (lambda p: p.update({"nova_object.name": "Instance"}), "spec_obj"),
        (lambda p: p.update({"nova_object.version": "2.0"}), "spec_obj"),
        (lambda p: p.update({"nova_object.namespace": "cinder"}), "spec_obj"),
        (
            lambda p: p["nova_object.data"].update(
                instance_group=P.obj("InstanceGroup", "1.11", {})
            ),
            "uuid",
        ),
        (
            lambda p: p["nova_object.data"].update(requested_resources={"a": 1}),
            "requested_resources",
        ),
    ],
)
def test_malformed_specs_raise_codec_error_with_path(mutate: Any, path: str) -> None:
    prim = P.request_spec()
    mutate(prim)
    with pytest.raises(CodecError) as info:
        codec.decode_request_spec(prim)
    assert path in str(info.value)


def test_not_an_object_at_all() -> None:
    bad: object
    for bad in ([], "spec", 42, None):
        with pytest.raises(CodecError):
            codec.decode_request_spec(bad)


def test_absurd_nesting_is_refused() -> None:
    deep: Any = "x"
    for _ in range(codec.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(CodecError, match="nested deeper"):
        codec.decode_request_spec(P.request_spec(scheduler_hints={"deep": deep}))


def test_request_spec_round_trip_through_json() -> None:
    spec = codec.decode_request_spec(nested_spec())
    again = codec.decode_request_spec(
        json.loads(json.dumps(nova_objects.encode_request_spec(spec)))
    )
    assert again == spec


def test_model_spec_helper_round_trips() -> None:
    spec = model_spec(num_instances=4)
    prim = nova_objects.encode_request_spec(spec)
    assert prim["nova_object.name"] == "RequestSpec" and prim["nova_object.version"] == "1.15"
    assert prim["nova_object.data"]["flavor"]["nova_object.name"] == "Flavor"
    assert codec.decode_request_spec(json.loads(json.dumps(prim))) == spec


def test_decode_does_not_mutate_input() -> None:
    prim = P.request_spec()
    before = copy.deepcopy(prim)
    codec.decode_request_spec(prim)
    assert prim == before


# ------------------------------------------------------------------ legacy (RPC < 4.3) dicts


def test_legacy_request_spec_and_filter_properties() -> None:
    request_spec = {
        "image": {
            "id": "img-1",
            "min_ram": 0,
            "properties": {
                "architecture": "x86_64",
                "hypervisor_type": "qemu",
                "trait:CUSTOM_GPU": "required",
                "trait:CUSTOM_NOPE": "forbidden",
                "hw_numa_nodes": "2",
            },
        },
        "instance_type": {"memory_mb": 1024, "vcpus": 1, "root_gb": 10, "flavorid": "m1"},
        "instance_properties": {
            "project_id": "p1",
            "user_id": "u1",
            "availability_zone": "az1",
            "uuid": "i-1",
        },
        "num_instances": 2,
    }
    filter_properties = {
        "scheduler_hints": {"group": "g-1", "same_host": ["i-0"]},
        "group_updated": True,
        "group_policies": ["affinity"],
        "group_hosts": ["cn-1"],
        "group_members": ["i-0"],
        "ignore_hosts": ["cn-9"],
        "force_hosts": ["cn-1"],
        "retry": {"num_attempts": 2, "hosts": [["cn-2", "cn-2.node"]]},
        "limits": {"memory_mb": 4096},
    }
    spec = codec.request_spec_from_legacy(request_spec, filter_properties)
    assert spec.flavor.memory_mb == 1024 and spec.num_instances == 2
    assert spec.project_id == "p1" and spec.availability_zone == "az1"
    assert spec.instance_uuid == "i-1"
    assert spec.image is not None
    props = spec.image.properties
    assert props.hw_architecture == "x86_64" and props.img_hv_type == "qemu"
    assert props.traits_required == frozenset({"CUSTOM_GPU"})
    assert props.hw_numa_nodes == 2
    assert spec.instance_group is not None
    assert spec.instance_group.policy == "affinity" and spec.instance_group.hosts == ("cn-1",)
    assert spec.instance_group.uuid == "g-1"
    assert spec.get_scheduler_hint("same_host") == "i-0"
    assert spec.ignore_hosts == ("cn-9",) and spec.force_hosts == ("cn-1",)
    assert spec.retry is not None and spec.retry.hosts == (("cn-2", "cn-2.node"),)
    assert spec.limits is not None and spec.limits.memory_mb == 4096


def _legacy_props(props: dict[str, Any]) -> ImageMetaProps:
    request_spec = {
        "image": {"id": "img-1", "properties": props},
        "instance_type": {"memory_mb": 1024, "vcpus": 1},
    }
    spec = codec.request_spec_from_legacy(request_spec, {})
    assert spec.image is not None
    return spec.image.properties


def test_legacy_image_uses_all_of_novas_legacy_names() -> None:
    props = _legacy_props(
        {
            "owner_id": "o-1",
            "vmware_ostype": "otherGuest",
            "xenapi_use_agent": "true",
            "vmware_adaptertype": "ide",
            "mappings": "[]",
            "os_distro": "ubuntu",
        }
    )
    assert props.get("img_owner_id") == "o-1" and props.get("owner_id") is None
    assert props.get("img_use_agent") == "true"
    assert props.hw_disk_bus == "ide" and props.get("vmware_adaptertype") is None
    assert props.get("img_mappings") == "[]" and props.get("mappings") is None
    # nova sets legacy names first, then current names: the current name wins.
    assert props.get("os_distro") == "ubuntu"


def test_legacy_image_current_name_beats_legacy_whatever_the_order() -> None:
    for raw in (
        {"architecture": "i686", "hw_architecture": "x86_64"},
        {"hw_architecture": "x86_64", "architecture": "i686"},
    ):
        assert _legacy_props(raw).hw_architecture == "x86_64"


def test_legacy_image_trait_needs_exactly_required() -> None:
    props = _legacy_props({"trait:CUSTOM_A": "required", "trait:CUSTOM_B": "Required "})
    assert props.traits_required == frozenset({"CUSTOM_A"})


def test_image_props_primitive_reads_each_typed_field_by_novas_type() -> None:
    props = codec.decode_image_props(
        P.obj(
            "ImageMetaProps",
            "1.43",
            {"hw_numa_nodes": "2", "hw_mem_encryption": "yes", "hw_cpu_policy": "dedicated"},
        )
    )
    assert props.hw_numa_nodes == 2 and props.hw_mem_encryption is True
    assert props.hw_cpu_policy == "dedicated"
    with pytest.raises(CodecError, match="hw_virtio_packed_ring"):
        codec.decode_image_props({"hw_virtio_packed_ring": "perhaps"})


def test_legacy_without_flavor_is_malformed() -> None:
    with pytest.raises(CodecError, match="instance_type"):
        codec.request_spec_from_legacy({"num_instances": 1}, {})
    with pytest.raises(CodecError):
        codec.request_spec_from_legacy("not a dict", {})


# ------------------------------------------------------------------ selections (the reply)


def _selection(**kw: Any) -> Selection:
    base: dict[str, Any] = {
        "compute_node_uuid": "5e1b8a2c-7d3f-4a61-9c0e-2b7f4d8e1a01",
        "service_host": "compute-1",
        "nodename": "compute-1",
        "cell_uuid": "8f3c2d1e-6b5a-4c9d-8e7f-1a2b3c4d5e6f",
        "allocation_request": json.dumps(
            {"allocations": {"5e1b8a2c": {"resources": {"VCPU": 1}}}, "mappings": {}}
        ),
        "allocation_request_version": "1.36",
        "availability_zone": "nova",
    }
    base.update(kw)
    return Selection(**base)


def test_selection_1_1_primitive_matches_nova() -> None:
    prim = codec.encode_selection(_selection())
    assert prim["nova_object.name"] == "Selection"
    assert prim["nova_object.version"] == "1.1"
    assert prim["nova_object.namespace"] == "nova"
    data = prim["nova_object.data"]
    assert set(data) == {
        "compute_node_uuid",
        "service_host",
        "nodename",
        "cell_uuid",
        "limits",
        "allocation_request",
        "allocation_request_version",
        "availability_zone",
    }
    assert set(prim["nova_object.changes"]) == set(data)
    assert isinstance(data["allocation_request"], str)
    # Limits are always a SchedulerLimits 1.0 with every field present (from_host_state).
    assert data["limits"]["nova_object.name"] == "SchedulerLimits"
    assert data["limits"]["nova_object.version"] == "1.0"
    assert data["limits"]["nova_object.data"] == {
        "numa_topology": None,
        "vcpu": None,
        "disk_gb": None,
        "memory_mb": None,
    }
    assert codec.decode_selection(json.loads(json.dumps(prim))) == _selection(
        limits=SchedulerLimits()
    )


def test_selection_with_numa_limits_and_legacy_dict() -> None:
    limits = SchedulerLimits(
        numa_topology=NUMATopologyLimits(
            cpu_allocation_ratio=16.0,
            ram_allocation_ratio=1.5,
            network_metadata=NetworkMetadata(frozenset({"physnet1"}), False),
        )
    )
    sel = _selection(limits=limits)
    prim = codec.encode_selection(sel)
    numa = prim["nova_object.data"]["limits"]["nova_object.data"]["numa_topology"]
    assert numa["nova_object.name"] == "NUMATopologyLimits"
    assert numa["nova_object.data"]["cpu_allocation_ratio"] == 16.0
    assert codec.decode_selection(prim) == sel
    legacy = codec.selection_to_dict(sel)
    assert legacy["host"] == "compute-1" and legacy["nodename"] == "compute-1"
    assert legacy["limits"]["numa_topology"]["nova_object.name"] == "NUMATopologyLimits"
    assert codec.selection_to_dict(_selection())["limits"] == {}


def test_encode_selections_objects_and_legacy_forms() -> None:
    a, b, c = _selection(service_host="a"), _selection(service_host="b"), _selection()
    objects = codec.encode_selections([[a, b], [c]], return_objects=True)
    assert [[s["nova_object.data"]["service_host"] for s in per] for per in objects] == [
        ["a", "b"],
        ["compute-1"],
    ]
    legacy = codec.encode_selections([[a, b], [c]], return_objects=False)
    assert legacy == [
        {"host": "a", "nodename": "compute-1", "limits": {}},
        {"host": "compute-1", "nodename": "compute-1", "limits": {}},
    ]


# ------------------------------------------------------------------ casts and context


def test_aggregates_in_every_shape_update_aggregates_sends() -> None:
    one = codec.decode_aggregates(P.aggregate())
    assert one == (
        Aggregate(
            id=5,
            uuid="9a8b7c6d-0000-4000-8000-00000000000a",
            name="az-east",
            hosts=("cn-00001", "cn-00002"),
            metadata={"availability_zone": "east", "ssd": "true"},
        ),
    )
    assert one[0].availability_zone == "east"
    listed = codec.decode_aggregates([P.aggregate(), P.aggregate(id=6, hosts=None)])
    assert [a.id for a in listed] == [5, 6] and listed[1].hosts == ()
    wrapped = codec.decode_aggregates(P.obj("AggregateList", "1.3", {"objects": [P.aggregate()]}))
    assert wrapped == one
    assert codec.decode_aggregates([nova_objects.encode_aggregate(one[0])]) == one
    with pytest.raises(CodecError):
        codec.decode_aggregates([P.obj("Service", "1.22", {"id": 1})])
    with pytest.raises(CodecError):
        codec.decode_aggregate(P.aggregate(id=None))


def test_instance_list_uuids() -> None:
    prim = nova_objects.encode_instance_list(["u1", "u2"], "cn-1")
    assert prim["nova_object.name"] == "InstanceList"
    assert codec.decode_instance_uuids(json.loads(json.dumps(prim))) == ("u1", "u2")
    with pytest.raises(CodecError):
        codec.decode_instance_uuids(P.obj("InstanceList", "2.6", {"objects": [{"host": "x"}]}))


def test_context_keys_and_token_kept_out_of_raw() -> None:
    message = {
        "_context_request_id": "req-1",
        "_context_global_request_id": "req-g",
        "_context_user": "u",
        "_context_project_id": "p",
        "_context_roles": ["member", 5],
        "_context_is_admin": True,
        "_context_timestamp": "2026-05-20T10:11:12.123456",
        "_context_auth_token": "SECRET-TOKEN",
        "_context_traceparent": "00-abc",
        "method": "x",
    }
    ctx = codec.decode_context(message)
    assert ctx.request_id == "req-1" and ctx.global_request_id == "req-g"
    assert ctx.user_id == "u" and ctx.project_id == "p"
    assert ctx.roles == ("member",) and ctx.is_admin is True
    assert ctx.timestamp is not None and ctx.timestamp.microsecond == 123456
    assert ctx.auth_token == "SECRET-TOKEN"
    assert "SECRET-TOKEN" not in repr(ctx)
    assert "auth_token" not in ctx.raw and ctx.raw["traceparent"] == "00-abc"


def test_context_of_wrong_types_never_fails() -> None:
    ctx = codec.decode_context(
        {"_context_request_id": 7, "_context_roles": "admin", "_context_is_admin": "yes"}
    )
    assert ctx.request_id is None and ctx.roles == () and ctx.is_admin is False
