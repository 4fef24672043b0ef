"""The payloads nova-scheduler puts in ``scheduler.select_destinations.start``/``.end``.

Versioned: ``RequestSpecPayload`` 1.1 as ``obj_to_primitive`` writes it (nova's
``nova/notifications/objects/request_spec.py``), built from the request model. Unversioned
(legacy): ``{"request_spec": RequestSpec.to_legacy_request_spec_dict()}``. Pure functions
over frozen values; nothing here sends anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from asyncsched.objects import codec
from asyncsched.objects.models import (
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    InstanceNUMACell,
    InstanceNUMATopology,
    InstancePCIRequests,
    RequestSpec,
    SchedulerRetries,
)

# Image fields of nova's ImageMetaPayload that the request model does not carry: null in the
# payload (see docs/parity.md "Where asyncsched knowingly differs").
_IMAGE_FIELDS_NOT_KEPT = (
    "visibility",
    "protected",
    "checksum",
    "virtual_size",
    "created_at",
    "updated_at",
    "tags",
    "direct_url",
)


def _obj(name: str, version: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """A versioned object primitive, as ``obj_to_primitive`` writes it (no changes key)."""
    return {
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": dict(data),
    }


def _plain(value: Any) -> Any:
    """JSON-ready: sets become sorted lists, tuples lists, mappings dicts."""
    if isinstance(value, frozenset | set):
        return sorted(value, key=str)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return value


def flavor_fields(f: Flavor) -> dict[str, Any]:
    """FlavorPayload's fields: the Flavor's but its id, and projects."""
    data: dict[str, Any] = codec.encode_flavor(f)["nova_object.data"]
    data.pop("id", None)
    # The conductor's Flavor has no projects loaded; nova's payload then says null.
    data["projects"] = None
    return data


def _props_fields(props: ImageMetaProps) -> dict[str, Any]:
    """Only the properties that are set (nova's populate_schema(set_none=False))."""
    data: dict[str, Any] = codec.encode_image_props(props)["nova_object.data"]
    return data


def _image_payload(image: ImageMeta) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": image.id,
        "name": image.name,
        "status": image.status,
        "owner": image.owner,
        "size": image.size,
        "container_format": image.container_format,
        "disk_format": image.disk_format,
        "min_ram": image.min_ram,
        "min_disk": image.min_disk,
        "properties": _obj("ImageMetaPropsPayload", "1.19", _props_fields(image.properties)),
    }
    data.update(dict.fromkeys(_IMAGE_FIELDS_NOT_KEPT))
    return _obj("ImageMetaPayload", "1.0", data)


def _numa_cell_payload(cell: InstanceNUMACell) -> dict[str, Any]:
    topo = cell.cpu_topology
    return _obj(
        "InstanceNUMACellPayload",
        "1.2",
        {
            "id": cell.id,
            "cpuset": sorted(cell.cpuset),
            "pcpuset": sorted(cell.pcpuset),
            "cpuset_reserved": None
            if cell.cpuset_reserved is None
            else sorted(cell.cpuset_reserved),
            "memory": cell.memory,
            "pagesize": cell.pagesize,
            "cpu_topology": None
            if topo is None
            else _obj(
                "VirtCPUTopologyPayload",
                "1.0",
                {"sockets": topo.sockets, "cores": topo.cores, "threads": topo.threads},
            ),
            "cpu_pinning_raw": None
            if cell.cpu_pinning is None
            else {str(k): v for k, v in cell.cpu_pinning.items()},
            "cpu_policy": cell.cpu_policy,
            "cpu_thread_policy": cell.cpu_thread_policy,
        },
    )


def _numa_payload(topo: InstanceNUMATopology, instance_uuid: str | None) -> dict[str, Any]:
    return _obj(
        "InstanceNUMATopologyPayload",
        "1.0",
        {
            "instance_uuid": topo.instance_uuid or instance_uuid,
            "cells": [_numa_cell_payload(c) for c in topo.cells],
            "emulator_threads_policy": topo.emulator_threads_policy,
        },
    )


def _pci_payload(reqs: InstancePCIRequests, instance_uuid: str | None) -> dict[str, Any]:
    requests = [
        _obj(
            "InstancePCIRequestPayload",
            "1.1",
            {
                "count": r.count,
                "spec": [dict(s) for s in r.spec],
                "alias_name": r.alias_name,
                "request_id": r.request_id,
                "numa_policy": r.numa_policy,
            },
        )
        for r in reqs.requests
    ]
    return _obj(
        "InstancePCIRequestsPayload",
        "1.0",
        {"instance_uuid": reqs.instance_uuid or instance_uuid, "requests": requests},
    )


def _destination_payload(dest: Destination) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if dest.host is not None:  # nova sets host, node and cell only when they are not None
        data["host"] = dest.host
    if dest.node is not None:
        data["node"] = dest.node
    if dest.cell is not None:
        data["cell"] = _obj(
            "CellMappingPayload",
            "2.0",
            {"uuid": dest.cell.uuid, "name": dest.cell.name, "disabled": dest.cell.disabled},
        )
    data["aggregates"] = list(dest.aggregates) if dest.aggregates else None
    return _obj("DestinationPayload", "1.0", data)


def _retry_payload(retry: SchedulerRetries) -> dict[str, Any]:
    return _obj(
        "SchedulerRetriesPayload",
        "1.0",
        {"num_attempts": retry.num_attempts, "hosts": [node for _, node in retry.hosts]},
    )


def _group_payload(group: InstanceGroup) -> dict[str, Any]:
    return _obj(
        "ServerGroupPayload",
        "1.1",
        {
            "uuid": group.uuid,
            "name": group.name,
            "user_id": group.user_id,
            "project_id": group.project_id,
            "policies": list(group.policies),
            "members": list(group.members),
            "hosts": list(group.hosts),
            "policy": group.policy,
            "rules": dict(group.rules),
        },
    )


def request_spec_payload(spec: RequestSpec) -> dict[str, Any]:
    """nova's ``RequestSpecPayload(request_spec).obj_to_primitive()`` (version 1.1)."""
    uuid = spec.instance_uuid
    data: dict[str, Any] = {
        "instance_uuid": uuid,
        "project_id": spec.project_id,
        "user_id": spec.user_id,
        "availability_zone": spec.availability_zone,
        "flavor": _obj("FlavorPayload", "1.4", flavor_fields(spec.flavor)),
        "force_hosts": spec.force_hosts[0] if spec.force_hosts else None,
        "force_nodes": spec.force_nodes[0] if spec.force_nodes else None,
        "ignore_hosts": None if spec.ignore_hosts is None else list(spec.ignore_hosts),
        "instance_group": None
        if spec.instance_group is None
        else _group_payload(spec.instance_group),
        "image": None if spec.image is None else _image_payload(spec.image),
        "numa_topology": None
        if spec.numa_topology is None
        else _numa_payload(spec.numa_topology, uuid),
        "pci_requests": None
        if spec.pci_requests is None
        else _pci_payload(spec.pci_requests, uuid),
        "num_instances": spec.num_instances,
        "requested_destination": None
        if spec.requested_destination is None
        else _destination_payload(spec.requested_destination),
        "retry": None if not spec.retry else _retry_payload(spec.retry),
        "scheduler_hints": {k: list(v) for k, v in spec.scheduler_hints.items()},
        "security_groups": list(spec.security_groups),
    }
    return _obj("RequestSpecPayload", "1.1", data)


def _legacy_image(image: ImageMeta | None) -> dict[str, Any]:
    """``obj_to_primitive(image)``: the fields that are set, properties as a dict."""
    if image is None:
        return {}
    out: dict[str, Any] = codec.encode_image(image)["nova_object.data"]
    out["properties"] = out["properties"]["nova_object.data"]
    return out


def _fields_of(value: Any) -> Any:
    """A model value as the plain field dict the legacy (JSON) serializer sends."""
    if value is None:
        return None
    if hasattr(value, "__dataclass_fields__"):
        return {name: _fields_of(getattr(value, name)) for name in value.__dataclass_fields__}
    return _plain(value)


def legacy_request_spec(spec: RequestSpec) -> dict[str, Any]:
    """nova's ``RequestSpec.to_legacy_request_spec_dict()``, JSON-ready."""
    instance: dict[str, Any] = {
        "numa_topology": _fields_of(spec.numa_topology),
        "pci_requests": _fields_of(spec.pci_requests),
        "project_id": spec.project_id,
        "user_id": spec.user_id,
        "availability_zone": spec.availability_zone,
        "uuid": spec.instance_uuid,
    }
    f = spec.flavor
    instance.update(
        root_gb=f.root_gb, ephemeral_gb=f.ephemeral_gb, memory_mb=f.memory_mb, vcpus=f.vcpus
    )
    flavor: dict[str, Any] = codec.encode_flavor(f)["nova_object.data"]
    return {
        "num_instances": spec.num_instances,
        "image": _legacy_image(spec.image),
        "instance_properties": instance,
        "instance_type": flavor,
    }
