"""Hand-written nova object primitives, shaped after the reference captures (nova 34).

Built field by field from ``reference/samples/request_spec.json`` and ``nova-scheduler.md`` §7
so the codec is tested against what a conductor really sends, including fields we ignore.
"""

from __future__ import annotations

from typing import Any


def obj(name: str, version: str, data: dict[str, Any], changes: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
    }
    if changes and data:
        out["nova_object.changes"] = sorted(data)
    return out


GROUP_UUID = "7c20cb89-674b-56be-a8ed-50446e4b20bc"
INSTANCE_UUIDS = [
    "f5d853a6-fb67-5d8b-a6e0-e1a5d4da1bba",
    "53bfb404-7170-5360-bf42-ca1c62064650",
    "1b19e791-0825-5651-967c-4d86453b981c",
]


def flavor(**overrides: Any) -> dict[str, Any]:
    data = {
        "id": 42,
        "name": "c1.medium-avx2",
        "memory_mb": 4096,
        "vcpus": 2,
        "root_gb": 40,
        "ephemeral_gb": 0,
        "flavorid": "c1.medium-avx2",
        "swap": 0,
        "rxtx_factor": 1.0,
        "vcpu_weight": 0,
        "disabled": False,
        "is_public": True,
        "extra_specs": {
            "capabilities:hypervisor_type": "QEMU",
            "hw:cpu_policy": "shared",
            "trait:HW_CPU_X86_AVX2": "required",
        },
        "description": None,
        "created_at": "2026-01-01T00:00:00Z",
    }
    data.update(overrides)
    return obj("Flavor", "1.2", data)


def image(**prop_overrides: Any) -> dict[str, Any]:
    props = {
        "hw_architecture": "x86_64",
        "hw_disk_bus": "virtio",
        "hw_vif_model": "virtio",
        "hw_vm_mode": "hvm",
        "img_hv_type": "kvm",
        "os_distro": "ubuntu",
        "os_type": "linux",
    }
    props.update(prop_overrides)
    return obj(
        "ImageMeta",
        "1.8",
        {
            "id": "68a16e3e-edea-5f7b-9fa9-1ff264aff533",
            "name": "ubuntu-24.04",
            "status": "active",
            "checksum": "f3a8c6c1f5b0a6d2e4c1b2a3d4e5f6a7",
            "container_format": "bare",
            "disk_format": "qcow2",
            "min_disk": 10,
            "min_ram": 512,
            "owner": "c0ffee00c0ffee00c0ffee00c0ffee00",
            "size": 612368384,
            "properties": obj("ImageMetaProps", "1.44", props),
        },
    )


def instance_group() -> dict[str, Any]:
    return obj(
        "InstanceGroup",
        "1.11",
        {
            "_rules": {"max_server_per_host": "1"},
            "hosts": ["cn-00000"],
            "id": 7,
            "members": [*INSTANCE_UUIDS, "2bc09d4b-7d2b-5d30-bf48-7bc0ebffd1a5"],
            "name": "web-anti-affinity",
            "policies": ["anti-affinity"],
            "policy": "anti-affinity",
            "project_id": "c0ffee00c0ffee00c0ffee00c0ffee00",
            "user_id": "6b2d0b0a1c1f4f1c9a1e1d2c3b4a5f60",
            "uuid": GROUP_UUID,
        },
    )


def request_spec(**overrides: Any) -> dict[str, Any]:
    """A boot of 3 instances in an anti-affinity group, as nova 34 serialises it."""
    data: dict[str, Any] = {
        "availability_zone": "nova",
        "flavor": flavor(),
        "force_hosts": None,
        "force_nodes": None,
        "ignore_hosts": None,
        "image": image(),
        "instance_group": instance_group(),
        "instance_uuid": INSTANCE_UUIDS[0],
        "is_bfv": False,
        "limits": obj(
            "SchedulerLimits",
            "1.0",
            {"disk_gb": None, "memory_mb": None, "numa_topology": None, "vcpu": None},
        ),
        "network_metadata": obj(
            "NetworkMetadata", "1.0", {"physnets": ["physnet1"], "tunneled": True}
        ),
        "num_instances": 3,
        "numa_topology": None,
        "pci_requests": obj("InstancePCIRequests", "1.1", {"requests": []}),
        "project_id": "c0ffee00c0ffee00c0ffee00c0ffee00",
        "request_level_params": obj("RequestLevelParams", "1.1", {}, changes=False),
        "requested_destination": None,
        "requested_resources": [],
        "retry": obj(
            "SchedulerRetries",
            "1.1",
            {
                "hosts": obj("ComputeNodeList", "1.17", {"objects": []}),
                "num_attempts": 1,
            },
        ),
        "scheduler_hints": {"group": [GROUP_UUID], "example_hint": ["a", "b"]},
        "security_groups": obj(
            "SecurityGroupList",
            "1.1",
            {"objects": [obj("SecurityGroup", "1.2", {"name": "default", "id": 1})]},
            changes=False,
        ),
        "user_id": "6b2d0b0a1c1f4f1c9a1e1d2c3b4a5f60",
    }
    data.update(overrides)
    return obj("RequestSpec", "1.15", data)


def numa_topology() -> dict[str, Any]:
    cell = obj(
        "InstanceNUMACell",
        "1.6",
        {
            "id": 0,
            "cpuset": [],
            "pcpuset": [0, 1],
            "memory": 2048,
            "pagesize": 2048,
            "cpu_policy": "dedicated",
            "cpu_thread_policy": None,
            "cpu_pinning_raw": {"0": 4, "1": 5},
            "cpu_topology": obj("VirtCPUTopology", "1.0", {"sockets": 1, "cores": 2, "threads": 1}),
            "cpuset_reserved": None,
        },
    )
    return obj(
        "InstanceNUMATopology",
        "1.3",
        {"cells": [cell], "instance_uuid": INSTANCE_UUIDS[0], "emulator_threads_policy": None},
    )


def pci_requests() -> dict[str, Any]:
    return obj(
        "InstancePCIRequests",
        "1.1",
        {
            "requests": [
                obj(
                    "InstancePCIRequest",
                    "1.4",
                    {
                        "count": 2,
                        "spec": [{"vendor_id": "8086", "product_id": "1520"}],
                        "alias_name": "nic",
                        "is_new": False,
                        "request_id": "b2f8c1f0-0000-4000-8000-000000000001",
                        "requester_id": None,
                        "numa_policy": "preferred",
                    },
                )
            ]
        },
    )


def destination() -> dict[str, Any]:
    return obj(
        "Destination",
        "1.4",
        {
            "host": "cn-00007",
            "node": None,
            "cell": obj(
                "CellMapping",
                "1.1",
                {
                    "id": 2,
                    "uuid": "8f3c2d1e-6b5a-4c9d-8e7f-1a2b3c4d5e6f",
                    "name": "cell1",
                    "transport_url": "rabbit://nova:secret@mq/",
                    "database_connection": "postgresql://nova:secret@db/nova",
                    "disabled": False,
                },
            ),
            "aggregates": ["agg-1,agg-2", "agg-3"],
            "forbidden_aggregates": ["agg-9"],
            "allow_cross_cell_move": False,
        },
    )


def request_group() -> dict[str, Any]:
    return obj(
        "RequestGroup",
        "1.3",
        {
            "use_same_provider": True,
            "resources": {"CUSTOM_FPGA": 1},
            "required_traits": ["CUSTOM_FOO"],
            "forbidden_traits": ["CUSTOM_BAR"],
            "aggregates": [["a1", "a2"]],
            "forbidden_aggregates": [],
            "requester_id": "port-1",
            "provider_uuids": [],
            "in_tree": None,
        },
    )


def aggregate(**overrides: Any) -> dict[str, Any]:
    data = {
        "id": 5,
        "uuid": "9a8b7c6d-0000-4000-8000-00000000000a",
        "name": "az-east",
        "hosts": ["cn-00001", "cn-00002"],
        "metadata": {"availability_zone": "east", "ssd": "true"},
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": None,
        "deleted": False,
        "deleted_at": None,
    }
    data.update(overrides)
    return obj("Aggregate", "1.3", data)
