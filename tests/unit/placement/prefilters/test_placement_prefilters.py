"""Request pre-filters: each one's effect on the spec and on the final query string."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import os_resource_classes
import os_traits
import pytest

from asyncsched.conf.options import Config, SchedulerOptions
from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import (
    Aggregate,
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstancePCIRequest,
    InstancePCIRequests,
    RequestContext,
    RequestGroup,
    RequestSpec,
)
from asyncsched.placement.prefilters import ALL_REQUEST_FILTERS, run_prefilters
from asyncsched.placement.prefilters.base import add_root_forbidden, add_root_required
from asyncsched.placement.prefilters.image_metadata import transform_image_metadata
from asyncsched.placement.query import build_resource_request
from asyncsched.placement.traits import KNOWN_TRAITS, STANDARD_RESOURCE_CLASSES

CTX = RequestContext(user_id="u", project_id="p")
AGGS = (
    Aggregate(1, "agg-az1", "az1-a", metadata={"availability_zone": "az1"}),
    Aggregate(2, "agg-az1b", "az1-b", metadata={"availability_zone": "az1"}),
    Aggregate(3, "agg-az2", "az2", metadata={"availability_zone": "az2"}),
    Aggregate(4, "agg-tenant", "t", metadata={"filter_tenant_id": "proj-1"}),
    Aggregate(5, "agg-tenant2", "t2", metadata={"filter_tenant_id2": "proj-1", "x": "y"}),
    Aggregate(6, "agg-gpu", "gpu", metadata={"trait:CUSTOM_GPU": "required"}),
    Aggregate(7, "agg-ssd", "ssd", metadata={"trait:CUSTOM_SSD": "required"}),
)


def spec(
    extra: dict[str, str] | None = None, props: ImageMetaProps | None = None, **kw: Any
) -> RequestSpec:
    image = ImageMeta(
        disk_format=kw.pop("disk_format", "qcow2"), properties=props or ImageMetaProps()
    )
    return RequestSpec(
        flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1, extra_specs=extra or {}),
        image=image,
        project_id=kw.pop("project_id", "proj-1"),
        **kw,
    )


def run(s: RequestSpec, **sched: Any) -> RequestSpec:
    return run_prefilters(CTX, s, Config(scheduler=SchedulerOptions(**sched)), AGGS)


def query(s: RequestSpec) -> str:
    return unquote(build_resource_request(s, Config()).to_querystring())


def test_defaults_add_owner_nova_and_forbid_disabled_computes() -> None:
    out = run(spec())
    assert query(out) == (
        "limit=1000&resources=DISK_GB:1,MEMORY_MB:512,VCPU:1"
        "&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED"
    )


def test_input_spec_is_not_mutated() -> None:
    s = spec()
    run(s, limit_tenants_to_placement_aggregate=True)
    assert s.request_level_params.root_required == frozenset()
    assert s.requested_destination is None


def test_availability_zone_maps_to_one_or_set() -> None:
    out = run(spec(availability_zone="az1"))
    assert out.requested_destination is not None
    assert "member_of=in:agg-az1,agg-az1b&" in query(out)


def test_unknown_availability_zone_adds_nothing() -> None:
    assert run(spec(availability_zone="nowhere")).requested_destination is None


def test_tenant_aggregates() -> None:
    out = run(spec(), limit_tenants_to_placement_aggregate=True)
    assert "member_of=in:agg-tenant,agg-tenant2&" in query(out)
    # AZ and tenant sets are AND-ed: two member_of parameters.
    both = run(spec(availability_zone="az2"), limit_tenants_to_placement_aggregate=True)
    assert "member_of=in:agg-az2&member_of=in:agg-tenant,agg-tenant2&" in query(both)


def test_tenant_without_aggregate() -> None:
    s = spec(project_id="other")
    assert run(s, limit_tenants_to_placement_aggregate=True).requested_destination is None
    with pytest.raises(NoValidHost, match="No hosts available for tenant"):
        run(
            s,
            limit_tenants_to_placement_aggregate=True,
            placement_aggregate_required_for_tenants=True,
        )


def test_image_type_support() -> None:
    out = run(spec(disk_format="raw"), query_placement_for_image_type_support=True)
    assert "COMPUTE_IMAGE_TYPE_RAW" in out.request_level_params.root_required
    bfv = run(spec(disk_format="raw", is_bfv=True), query_placement_for_image_type_support=True)
    assert "COMPUTE_IMAGE_TYPE_RAW" not in bfv.request_level_params.root_required
    odd = run(spec(disk_format="weird"), query_placement_for_image_type_support=True)
    assert not any(
        t.startswith("COMPUTE_IMAGE_TYPE") for t in odd.request_level_params.root_required
    )


def test_isolated_aggregates_forbid_unrequested_trait_aggregates() -> None:
    out = run(spec({"trait:CUSTOM_GPU": "required"}), enable_isolated_aggregate_filtering=True)
    assert out.requested_destination is not None
    assert out.requested_destination.forbidden_aggregates == {"agg-ssd"}
    assert "member_of=!in:agg-ssd&" in query(out)
    assert run(spec()).requested_destination is None  # option off


def test_image_metadata_to_traits() -> None:
    props = ImageMetaProps(
        hw_disk_bus="virtio", hw_video_model="qxl", hw_vif_model="e1000e", hw_architecture="x86_64"
    )
    out = run(spec(props=props), image_metadata_prefilter=True)
    assert {
        "COMPUTE_STORAGE_BUS_VIRTIO",
        "COMPUTE_GRAPHICS_MODEL_QXL",
        "COMPUTE_NET_VIF_MODEL_E1000E",
        "HW_ARCH_X86_64",
    } <= out.request_level_params.root_required


def test_image_metadata_unknown_trait_adds_none() -> None:
    props = ImageMetaProps(hw_disk_bus="virtio", hw_video_model="hologram")
    s = spec(props=props)
    assert (
        transform_image_metadata(
            CTX, s, Config(scheduler=SchedulerOptions(image_metadata_prefilter=True)), AGGS
        )
        is s
    )


@pytest.mark.parametrize(
    ("extra", "props", "traits"),
    [
        ({"accel:device_profile": "dp1"}, None, {"COMPUTE_ACCELERATORS"}),
        ({"hw:virtio_packed_ring": "true"}, None, {"COMPUTE_NET_VIRTIO_PACKED"}),
        ({}, ImageMetaProps(hw_virtio_packed_ring=True), {"COMPUTE_NET_VIRTIO_PACKED"}),
        ({"hw:ephemeral_encryption": "yes"}, None, {"COMPUTE_EPHEMERAL_ENCRYPTION"}),
        (
            {"hw:ephemeral_encryption": "yes", "hw:ephemeral_encryption_format": "luks"},
            None,
            {"COMPUTE_EPHEMERAL_ENCRYPTION", "COMPUTE_EPHEMERAL_ENCRYPTION_LUKS"},
        ),
        ({"hw:sound_model": "virtio"}, None, {"COMPUTE_SOUND_MODEL_VIRTIO"}),
        ({"hw:tpm_version": "2.0"}, None, {"COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER"}),
        (
            {"hw:tpm_version": "2.0", "hw:tpm_secret_security": "host"},
            None,
            {"COMPUTE_SECURITY_TPM_SECRET_SECURITY_HOST"},
        ),
    ],
)
def test_trait_only_prefilters(
    extra: dict[str, str], props: ImageMetaProps | None, traits: set[str]
) -> None:
    out = run(spec(extra, props))
    assert out.request_level_params.root_required == traits | {"OWNER_NOVA"}


def test_trait_prefilters_do_nothing_when_not_asked() -> None:
    out = run(spec({"hw:virtio_packed_ring": "false", "hw:sound_model": "ich6"}))
    assert out.request_level_params.root_required == {"OWNER_NOVA"}


def test_unsupported_tpm_secret_security_is_no_valid_host() -> None:
    with pytest.raises(NoValidHost, match=r"TPM secret security 'bogus' is not supported\."):
        run(spec({"hw:tpm_version": "2.0", "hw:tpm_secret_security": "bogus"}))


def test_owner_nova_on_pci_alias_groups_only() -> None:
    pci = InstancePCIRequests(
        requests=(
            InstancePCIRequest(count=1, alias_name="a1", request_id="req-1"),
            InstancePCIRequest(count=1, alias_name=None, request_id="req-port"),
        )
    )
    groups = (
        RequestGroup(requester_id="req-1-0", resources={"CUSTOM_PCI_X": 1}),
        RequestGroup(requester_id="req-port-0", resources={"CUSTOM_PCI_Y": 1}),
        RequestGroup(requester_id="port-uuid", resources={"NET_BW_EGR_KILOBIT_PER_SEC": 1}),
    )
    out = run(spec(pci_requests=pci, requested_resources=groups))
    by_id = {g.requester_id: g.required_traits for g in out.requested_resources}
    assert by_id == {"req-1-0": {"OWNER_NOVA"}, "req-port-0": set(), "port-uuid": set()}


def test_existing_destination_is_kept() -> None:
    s = spec(
        availability_zone="az2", requested_destination=Destination(host="h", aggregates=("x",))
    )
    out = run(s)
    assert out.requested_destination is not None
    assert out.requested_destination.host == "h"
    assert out.requested_destination.aggregates == ("x", "agg-az2")


def test_named_host_move_keeps_the_servers_zone() -> None:
    """An evacuate to a named host (conductor: requested_destination host/node, ignore_hosts
    the source, forced hosts reset) of a server booted into ``az2:<host>``: nova's
    map_az_to_placement_aggregate still adds the zone, so the query asks for the named
    host's tree AND the zone's aggregate (a host of another zone: no candidate, as nova)."""
    s = spec(
        availability_zone="az2",
        ignore_hosts=("compute4",),
        requested_destination=Destination(host="compute1", node="compute1"),
    )
    request = build_resource_request(
        run(s), Config(), nodes_for=lambda host, node: ["cn-1"] if host == "compute1" else []
    )
    assert unquote(request.to_querystring()) == (
        "in_tree=cn-1&limit=1000&member_of=in:agg-az2"
        "&resources=DISK_GB:1,MEMORY_MB:512,VCPU:1"
        "&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED"
    )


def test_nova_order() -> None:
    names = [f.__name__ for f in ALL_REQUEST_FILTERS]
    assert names == [
        "require_tenant_aggregate",
        "map_az_to_placement_aggregate",
        "require_image_type_support",
        "compute_status_filter",
        "isolate_aggregates",
        "transform_image_metadata",
        "accelerators_filter",
        "packed_virtqueue_filter",
        "ephemeral_encryption_filter",
        "virtio_sound_filter",
        "tpm_secret_security_filter",
        "owner_nova_filter",
    ]


def test_trait_and_resource_class_tables_match_os_traits() -> None:
    known = set(os_traits.get_traits())
    assert KNOWN_TRAITS <= known
    prefixes = (
        "COMPUTE_STORAGE_BUS_",
        "COMPUTE_GRAPHICS_MODEL_",
        "COMPUTE_NET_VIF_MODEL_",
        "HW_ARCH_",
        "COMPUTE_ARCH_",
        "COMPUTE_VIOMMU_",
        "COMPUTE_IMAGE_TYPE_",
    )
    assert {t for t in known if t.startswith(prefixes)} == KNOWN_TRAITS
    assert set(os_resource_classes.STANDARDS) == STANDARD_RESOURCE_CLASSES


def test_malformed_values_fail_the_request_not_the_service() -> None:
    s = spec({"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "x-y"})
    with pytest.raises(NoValidHost):
        run(s, enable_isolated_aggregate_filtering=True)
    odd_types = spec(
        {"hw:tpm_version": "2.0"},
        props=ImageMetaProps(hw_vif_model="e1000", other={"hw_firmware_stateless": 1}),
        availability_zone="az1",
    )
    assert (
        "COMPUTE_NET_VIF_MODEL_E1000"
        in run(odd_types, image_metadata_prefilter=True).request_level_params.root_required
    )


def test_reference_sample_request_spec_end_to_end() -> None:
    """nova 34's captured RequestSpec (samples/request_spec.json) -> the query nova would send."""
    import json

    from asyncsched.objects.codec import decode_request_spec
    from tests.support.reference import SAMPLES

    sample = SAMPLES / "request_spec.json"
    s = decode_request_spec(json.loads(sample.read_text())["spec_obj"])
    aggs = (Aggregate(9, "agg-nova", "default-az", metadata={"availability_zone": "nova"}),)
    out = run_prefilters(CTX, s, Config(), aggs)
    # anti-affinity group hint: no limit; AZ "nova" -> its aggregate; flavor trait; prefilters
    assert query(out) == (
        "member_of=in:agg-nova&required=HW_CPU_X86_AVX2"
        "&resources=DISK_GB:40,MEMORY_MB:4096,VCPU:2"
        "&root_required=OWNER_NOVA,!COMPUTE_STATUS_DISABLED"
    )


def test_root_traits_are_added_once_and_a_spec_that_has_them_is_returned_as_is() -> None:
    spec = RequestSpec(flavor=Flavor(memory_mb=512, vcpus=1))
    both = add_root_forbidden(add_root_required(spec, "HW_A", "HW_B"), "HW_C")
    assert both.request_level_params.root_required == {"HW_A", "HW_B"}
    assert both.request_level_params.root_forbidden == {"HW_C"}
    assert spec.request_level_params.root_required == frozenset()  # a new spec, not a mutation
    assert add_root_required(both, "HW_B") is both and add_root_forbidden(both, "HW_C") is both
    more = add_root_forbidden(both, "HW_D")
    assert more.request_level_params.root_forbidden == {"HW_C", "HW_D"}
    assert more.request_level_params.root_required == {"HW_A", "HW_B"}
