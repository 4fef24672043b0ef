"""The one place that reads and writes nova versioned-object primitives.

Decoding is lenient the way a newer-or-older nova peer needs: unknown fields are ignored, any
minor version of a known major is accepted, unset fields get nova's defaults, and plain dicts
(no ``nova_object.*`` wrapper) are read as the object's data. It is strict about what would
make a decision wrong: a wrong type, an unknown object name or a different major version raises
:class:`CodecError` with the path of the offending value, so the RPC layer can answer with a
clear failure instead of scheduling on garbage.

Encoding writes what nova itself writes (Selection 1.1, SchedulerLimits 1.0, RequestSpec 1.15
...), so an unmodified conductor rebuilds its own objects from our replies.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from asyncsched.objects.models import (
    Aggregate,
    CellMapping,
    Destination,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    InstanceGroup,
    InstanceNUMACell,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NetworkMetadata,
    NetworkRequest,
    NUMATopologyLimits,
    RequestContext,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
    SchedulerLimits,
    SchedulerRetries,
    Selection,
    VirtCPUTopology,
)

T = TypeVar("T")

NAME = "nova_object.name"
NAMESPACE = "nova_object.namespace"
VERSION = "nova_object.version"
DATA = "nova_object.data"
CHANGES = "nova_object.changes"

# The versions we write. Readers accept any minor version of the same major.
OBJECT_VERSIONS: dict[str, str] = {
    "RequestSpec": "1.15",
    "Flavor": "1.2",
    "ImageMeta": "1.8",
    "ImageMetaProps": "1.44",
    "InstanceNUMATopology": "1.3",
    "InstanceNUMACell": "1.6",
    "VirtCPUTopology": "1.0",
    "InstancePCIRequests": "1.1",
    "InstancePCIRequest": "1.4",
    "InstanceGroup": "1.11",
    "Destination": "1.4",
    "CellMapping": "1.1",
    "SchedulerRetries": "1.1",
    "ComputeNodeList": "1.17",
    "ComputeNode": "1.19",
    "SchedulerLimits": "1.0",
    "NUMATopologyLimits": "1.1",
    "NetworkMetadata": "1.0",
    "RequestGroup": "1.3",
    "RequestLevelParams": "1.1",
    "SecurityGroupList": "1.1",
    "SecurityGroup": "1.2",
    "NetworkRequestList": "1.1",
    "NetworkRequest": "1.3",
    "Selection": "1.1",
    "Aggregate": "1.3",
    "AggregateList": "1.3",
    "InstanceList": "2.6",
    "Instance": "2.8",
}

# Nested primitives deeper than this are refused (a hostile message could nest forever).
MAX_DEPTH = 32


class CodecError(ValueError):
    """A primitive we cannot turn into a model value; ``path`` says where it went wrong."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


# --------------------------------------------------------------------------------------------
# Scalar readers: nova's field coercion rules, with the path in every error.


def _type_name(value: Any) -> str:
    return type(value).__name__


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise CodecError(path, f"expected an integer, got {_type_name(value)}")


def _opt_int(value: Any, path: str) -> int | None:
    return None if value is None else _int(value, path)


def _float(value: Any, path: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise CodecError(path, f"expected a number, got {_type_name(value)}")


def _str(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise CodecError(path, f"expected a string, got {_type_name(value)}")


def _opt_str(value: Any, path: str) -> str | None:
    return None if value is None else _str(value, path)


_TRUE = {"true", "1", "yes", "on", "y", "t"}
_FALSE = {"false", "0", "no", "off", "n", "f", ""}


def _bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise CodecError(path, f"expected a boolean, got {_type_name(value)}")


def _opt_bool(value: Any, path: str) -> bool | None:
    return None if value is None else _bool(value, path)


def _list(value: Any, path: str) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    raise CodecError(path, f"expected a list, got {_type_name(value)}")


def _dict(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise CodecError(path, "dict keys must be strings")
        return value
    raise CodecError(path, f"expected an object, got {_type_name(value)}")


def _str_tuple(value: Any, path: str) -> tuple[str, ...]:
    return tuple(_str(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


def _opt_str_tuple(value: Any, path: str) -> tuple[str, ...] | None:
    return None if value is None else _str_tuple(value, path)


def _str_set(value: Any, path: str) -> frozenset[str]:
    return frozenset() if value is None else frozenset(_str_tuple(value, path))


def _int_set(value: Any, path: str) -> frozenset[int]:
    if value is None:
        return frozenset()
    return frozenset(_int(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


def _str_dict(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    out: dict[str, str] = {}
    for key, val in _dict(value, path).items():
        if val is None:
            continue
        if isinstance(val, str):
            out[key] = val
        elif isinstance(val, dict | list):
            out[key] = json.dumps(val)
        else:
            out[key] = _str(val, f"{path}.{key}")
    return out


def _field(
    data: Mapping[str, Any], name: str, path: str, reader: Callable[[Any, str], T], default: T
) -> T:
    """Read one optional field; an absent key (unset in nova) gives ``default``."""
    if name not in data:
        return default
    return reader(data[name], f"{path}.{name}")


def _required(data: Mapping[str, Any], name: str, path: str, reader: Callable[[Any, str], T]) -> T:
    if name not in data or data[name] is None:
        raise CodecError(f"{path}.{name}", "required field is missing")
    return reader(data[name], f"{path}.{name}")


# --------------------------------------------------------------------------------------------
# The object wrapper.


def unwrap(value: Any, path: str, *names: str) -> dict[str, Any]:
    """Return the data of an object primitive named one of ``names``.

    A plain dict without the wrapper is taken as the data itself (older oslo-only callers and
    hand-built specs send that). Another namespace, another object name or another major version
    is refused; a newer minor version is read field by field, ignoring what we do not know.
    """
    obj = _dict(value, path)
    if NAME not in obj:
        if DATA in obj:
            raise CodecError(path, "object primitive without nova_object.name")
        return obj
    name = obj[NAME]
    if not isinstance(name, str) or name not in names:
        raise CodecError(path, f"unexpected object {name!r}, expected {' or '.join(names)}")
    namespace = obj.get(NAMESPACE, "nova")
    if namespace != "nova":
        raise CodecError(path, f"unknown object namespace {namespace!r}")
    version = obj.get(VERSION)
    if version is not None:
        if not isinstance(version, str):
            raise CodecError(path, "nova_object.version must be a string")
        ours = OBJECT_VERSIONS.get(name)
        major = version.split(".", 1)[0]
        if ours is not None and major != ours.split(".", 1)[0]:
            raise CodecError(path, f"unsupported {name} version {version} (we speak {ours})")
    data = obj.get(DATA, {})
    return _dict(data, f"{path}.{DATA}")


def wrap(name: str, data: dict[str, Any], changes: Iterable[str] | None = None) -> dict[str, Any]:
    """Build a primitive the way nova's ``obj_to_primitive`` does (changes only when any)."""
    out: dict[str, Any] = {
        NAME: name,
        NAMESPACE: "nova",
        VERSION: OBJECT_VERSIONS[name],
        DATA: data,
    }
    changed = list(data) if changes is None else list(changes)
    if changed:
        out[CHANGES] = changed
    return out


def _objects(value: Any, path: str, list_name: str) -> list[Any]:
    """Items of an ``XxxList`` object primitive, or of a plain JSON list."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    data = unwrap(value, path, list_name)
    return _list(data.get("objects", []), f"{path}.objects")


def _check_depth(value: Any, path: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise CodecError(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for v in value.values():
            _check_depth(v, path, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_depth(v, path, depth + 1)


# --------------------------------------------------------------------------------------------
# Decoding: primitives -> model values.


def decode_flavor(value: Any, path: str = "flavor") -> Flavor:
    d = unwrap(value, path, "Flavor")
    return Flavor(
        memory_mb=_required(d, "memory_mb", path, _int),
        vcpus=_required(d, "vcpus", path, _int),
        root_gb=_field(d, "root_gb", path, _int, 0),
        ephemeral_gb=_field(d, "ephemeral_gb", path, _int, 0),
        swap=_field(d, "swap", path, _int, 0),
        flavorid=_field(d, "flavorid", path, _opt_str, None) or "",
        id=_field(d, "id", path, _opt_int, None),
        name=_field(d, "name", path, _opt_str, None),
        rxtx_factor=_field(d, "rxtx_factor", path, _opt_float, None) or 1.0,
        vcpu_weight=_field(d, "vcpu_weight", path, _opt_int, None),
        disabled=_field(d, "disabled", path, _opt_bool, None) or False,
        is_public=_field(d, "is_public", path, _opt_bool, None) is not False,
        extra_specs=_field(d, "extra_specs", path, _str_dict, {}),
        description=_field(d, "description", path, _opt_str, None),
    )


def _opt_float(value: Any, path: str) -> float | None:
    return None if value is None else _float(value, path)


_PROP_READERS: dict[str, Callable[[Any, str], Any]] = {
    "hw_maxphysaddr_bits": _opt_int,
    "hw_numa_nodes": _opt_int,
    "hw_virtio_packed_ring": _opt_bool,
    "hw_mem_encryption": _opt_bool,
    "hw_ephemeral_encryption": _opt_bool,
}
_TYPED_PROPS = tuple(n for n in ImageMetaProps.__dataclass_fields__ if n not in ("other",))

# Glance property names nova maps to ImageMetaProps fields (ImageMetaProps._legacy_property_map).
_LEGACY_IMAGE_PROPS = {
    "architecture": "hw_architecture",
    "hypervisor_type": "img_hv_type",
    "vm_mode": "hw_vm_mode",
    "hypervisor_version_requires": "img_hv_requested_version",
}


def decode_image_props(value: Any, path: str = "image.properties") -> ImageMetaProps:
    d = unwrap(value, path, "ImageMetaProps")
    return _image_props_from_fields(d, path)


def _image_props_from_fields(d: Mapping[str, Any], path: str) -> ImageMetaProps:
    kwargs: dict[str, Any] = {}
    other: dict[str, Any] = {}
    for key, val in d.items():
        if key == "traits_required":
            kwargs[key] = _str_set(val, f"{path}.{key}")
        elif key in _TYPED_PROPS:
            reader: Callable[[Any, str], Any] = _PROP_READERS.get(key, _opt_str)
            kwargs[key] = reader(val, f"{path}.{key}")
        elif val is not None:
            other[key] = val
    return ImageMetaProps(**kwargs, other=other)


def decode_image(value: Any, path: str = "image") -> ImageMeta:
    d = unwrap(value, path, "ImageMeta")
    props = d.get("properties")
    return ImageMeta(
        id=_field(d, "id", path, _opt_str, None),
        name=_field(d, "name", path, _opt_str, None),
        status=_field(d, "status", path, _opt_str, None),
        disk_format=_field(d, "disk_format", path, _opt_str, None),
        container_format=_field(d, "container_format", path, _opt_str, None),
        owner=_field(d, "owner", path, _opt_str, None),
        size=_field(d, "size", path, _opt_int, None),
        min_ram=_field(d, "min_ram", path, _opt_int, None),
        min_disk=_field(d, "min_disk", path, _opt_int, None),
        properties=(
            ImageMetaProps() if props is None else decode_image_props(props, f"{path}.properties")
        ),
    )


def _decode_cpu_topology(value: Any, path: str) -> VirtCPUTopology | None:
    if value is None:
        return None
    d = unwrap(value, path, "VirtCPUTopology")
    return VirtCPUTopology(
        sockets=_field(d, "sockets", path, _int, 1),
        cores=_field(d, "cores", path, _int, 1),
        threads=_field(d, "threads", path, _int, 1),
    )


def _decode_pinning(value: Any, path: str) -> dict[int, int] | None:
    if value is None:
        return None
    return {_int(k, path): _int(v, f"{path}.{k}") for k, v in _dict(value, path).items()}


def decode_numa_cell(value: Any, path: str) -> InstanceNUMACell:
    d = unwrap(value, path, "InstanceNUMACell")
    reserved = d.get("cpuset_reserved")
    return InstanceNUMACell(
        id=_field(d, "id", path, _int, 0),
        cpuset=_field(d, "cpuset", path, _int_set, frozenset()),
        pcpuset=_field(d, "pcpuset", path, _int_set, frozenset()),
        memory=_field(d, "memory", path, _int, 0),
        pagesize=_field(d, "pagesize", path, _opt_int, None),
        cpuset_reserved=None if reserved is None else _int_set(reserved, f"{path}.cpuset_reserved"),
        cpu_topology=_decode_cpu_topology(d.get("cpu_topology"), f"{path}.cpu_topology"),
        cpu_pinning=_decode_pinning(d.get("cpu_pinning_raw"), f"{path}.cpu_pinning_raw"),
        cpu_policy=_field(d, "cpu_policy", path, _opt_str, None),
        cpu_thread_policy=_field(d, "cpu_thread_policy", path, _opt_str, None),
    )


def decode_numa_topology(value: Any, path: str = "numa_topology") -> InstanceNUMATopology | None:
    if value is None:
        return None
    d = unwrap(value, path, "InstanceNUMATopology")
    cells = _list(d.get("cells") or [], f"{path}.cells")
    return InstanceNUMATopology(
        cells=tuple(decode_numa_cell(c, f"{path}.cells[{i}]") for i, c in enumerate(cells)),
        instance_uuid=_field(d, "instance_uuid", path, _opt_str, None),
        emulator_threads_policy=_field(d, "emulator_threads_policy", path, _opt_str, None),
    )


def decode_pci_requests(value: Any, path: str = "pci_requests") -> InstancePCIRequests | None:
    if value is None:
        return None
    d = unwrap(value, path, "InstancePCIRequests")
    reqs = []
    for i, item in enumerate(_list(d.get("requests") or [], f"{path}.requests")):
        p = f"{path}.requests[{i}]"
        r = unwrap(item, p, "InstancePCIRequest")
        specs = _list(r.get("spec") or [], f"{p}.spec")
        reqs.append(
            InstancePCIRequest(
                count=_field(r, "count", p, _int, 1),
                spec=tuple(_str_dict(s, f"{p}.spec[{j}]") for j, s in enumerate(specs)),
                alias_name=_field(r, "alias_name", p, _opt_str, None),
                is_new=_field(r, "is_new", p, _opt_bool, None) or False,
                request_id=_field(r, "request_id", p, _opt_str, None),
                requester_id=_field(r, "requester_id", p, _opt_str, None),
                numa_policy=_field(r, "numa_policy", p, _opt_str, None),
            )
        )
    return InstancePCIRequests(
        requests=tuple(reqs), instance_uuid=_field(d, "instance_uuid", path, _opt_str, None)
    )


def decode_instance_group(value: Any, path: str = "instance_group") -> InstanceGroup | None:
    if value is None:
        return None
    d = unwrap(value, path, "InstanceGroup")
    policy = _field(d, "policy", path, _opt_str, None)
    policies = _str_tuple(d.get("policies") or [], f"{path}.policies")
    if policy is None and policies:
        policy = policies[0]
    if not policies and policy is not None:
        policies = (policy,)
    rules_key = "_rules" if "_rules" in d else "rules"
    return InstanceGroup(
        uuid=_required(d, "uuid", path, _str),
        id=_field(d, "id", path, _opt_int, None),
        name=_field(d, "name", path, _opt_str, None),
        user_id=_field(d, "user_id", path, _opt_str, None),
        project_id=_field(d, "project_id", path, _opt_str, None),
        policy=policy,
        policies=policies,
        members=_str_tuple(d.get("members") or [], f"{path}.members"),
        hosts=_str_tuple(d.get("hosts") or [], f"{path}.hosts"),
        rules=_field(d, rules_key, path, _str_dict, {}),
    )


def decode_cell_mapping(value: Any, path: str) -> CellMapping | None:
    if value is None:
        return None
    d = unwrap(value, path, "CellMapping")
    return CellMapping(
        uuid=_required(d, "uuid", path, _str),
        name=_field(d, "name", path, _opt_str, None),
        id=_field(d, "id", path, _opt_int, None),
        disabled=_field(d, "disabled", path, _opt_bool, None) or False,
    )


def decode_destination(value: Any, path: str = "requested_destination") -> Destination | None:
    if value is None:
        return None
    d = unwrap(value, path, "Destination")
    return Destination(
        host=_field(d, "host", path, _opt_str, None),
        node=_field(d, "node", path, _opt_str, None),
        cell=decode_cell_mapping(d.get("cell"), f"{path}.cell"),
        aggregates=_str_tuple(d.get("aggregates") or [], f"{path}.aggregates"),
        forbidden_aggregates=_field(d, "forbidden_aggregates", path, _str_set, frozenset()),
        allow_cross_cell_move=_field(d, "allow_cross_cell_move", path, _opt_bool, None) or False,
    )


def decode_retry(value: Any, path: str = "retry") -> SchedulerRetries | None:
    if value is None:
        return None
    d = unwrap(value, path, "SchedulerRetries")
    hosts = []
    for i, node in enumerate(_objects(d.get("hosts"), f"{path}.hosts", "ComputeNodeList")):
        p = f"{path}.hosts[{i}]"
        n = unwrap(node, p, "ComputeNode")
        hosts.append(
            (
                _field(n, "host", p, _opt_str, None) or "",
                _field(n, "hypervisor_hostname", p, _opt_str, None) or "",
            )
        )
    return SchedulerRetries(
        num_attempts=_field(d, "num_attempts", path, _int, 0), hosts=tuple(hosts)
    )


def decode_network_metadata(value: Any, path: str = "network_metadata") -> NetworkMetadata:
    if value is None:
        return NetworkMetadata()
    d = unwrap(value, path, "NetworkMetadata")
    return NetworkMetadata(
        physnets=_field(d, "physnets", path, _str_set, frozenset()),
        tunneled=_field(d, "tunneled", path, _opt_bool, None) or False,
    )


def decode_limits(value: Any, path: str = "limits") -> SchedulerLimits | None:
    if value is None:
        return None
    d = unwrap(value, path, "SchedulerLimits")
    numa: NUMATopologyLimits | None = None
    raw = d.get("numa_topology")
    if raw is not None:
        p = f"{path}.numa_topology"
        n = unwrap(raw, p, "NUMATopologyLimits")
        nm = n.get("network_metadata")
        numa = NUMATopologyLimits(
            cpu_allocation_ratio=_required(n, "cpu_allocation_ratio", p, _float),
            ram_allocation_ratio=_required(n, "ram_allocation_ratio", p, _float),
            network_metadata=None
            if nm is None
            else decode_network_metadata(nm, f"{p}.network_metadata"),
        )
    return SchedulerLimits(
        numa_topology=numa,
        vcpu=_field(d, "vcpu", path, _opt_int, None),
        disk_gb=_field(d, "disk_gb", path, _opt_int, None),
        memory_mb=_field(d, "memory_mb", path, _opt_int, None),
    )


def _aggregate_lists(value: Any, path: str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ()
    return tuple(_str_tuple(v, f"{path}[{i}]") for i, v in enumerate(_list(value, path)))


def decode_request_group(value: Any, path: str) -> RequestGroup:
    d = unwrap(value, path, "RequestGroup")
    resources = {
        k: _int(v, f"{path}.resources.{k}")
        for k, v in _dict(d.get("resources") or {}, f"{path}.resources").items()
    }
    return RequestGroup(
        use_same_provider=_field(d, "use_same_provider", path, _opt_bool, None) is not False,
        resources=resources,
        required_traits=_field(d, "required_traits", path, _str_set, frozenset()),
        forbidden_traits=_field(d, "forbidden_traits", path, _str_set, frozenset()),
        aggregates=_field(d, "aggregates", path, _aggregate_lists, ()),
        forbidden_aggregates=_field(d, "forbidden_aggregates", path, _str_set, frozenset()),
        requester_id=_field(d, "requester_id", path, _opt_str, None),
        provider_uuids=_str_tuple(d.get("provider_uuids") or [], f"{path}.provider_uuids"),
        in_tree=_field(d, "in_tree", path, _opt_str, None),
    )


def decode_request_level_params(
    value: Any, path: str = "request_level_params"
) -> RequestLevelParams:
    if value is None:
        return RequestLevelParams()
    d = unwrap(value, path, "RequestLevelParams")
    return RequestLevelParams(
        root_required=_field(d, "root_required", path, _str_set, frozenset()),
        root_forbidden=_field(d, "root_forbidden", path, _str_set, frozenset()),
        same_subtree=_field(d, "same_subtree", path, _aggregate_lists, ()),
    )


def _decode_security_groups(value: Any, path: str) -> tuple[str, ...]:
    names = []
    for i, item in enumerate(_objects(value, path, "SecurityGroupList")):
        p = f"{path}[{i}]"
        if isinstance(item, str):
            names.append(item)
            continue
        g = unwrap(item, p, "SecurityGroup")
        name = _field(g, "name", p, _opt_str, None)
        if name is not None:
            names.append(name)
    return tuple(names)


def _decode_networks(value: Any, path: str) -> tuple[NetworkRequest, ...]:
    out = []
    for i, item in enumerate(_objects(value, path, "NetworkRequestList")):
        p = f"{path}[{i}]"
        n = unwrap(item, p, "NetworkRequest")
        out.append(
            NetworkRequest(
                network_id=_field(n, "network_id", p, _opt_str, None),
                address=_field(n, "address", p, _opt_str, None),
                port_id=_field(n, "port_id", p, _opt_str, None),
                pci_request_id=_field(n, "pci_request_id", p, _opt_str, None),
                tag=_field(n, "tag", p, _opt_str, None),
                arq_uuid=_field(n, "arq_uuid", p, _opt_str, None),
                device_profile=_field(n, "device_profile", p, _opt_str, None),
            )
        )
    return tuple(out)


def _decode_hints(value: Any, path: str) -> dict[str, tuple[str, ...]]:
    """nova's DictOfListOfStrings: scalars are wrapped in a list, values coerced to str."""
    if value is None:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for key, val in _dict(value, path).items():
        if val is None:
            continue
        items = val if isinstance(val, list | tuple) else [val]
        out[key] = tuple(
            v if isinstance(v, str) else json.dumps(v) if isinstance(v, dict | list) else str(v)
            for v in items
        )
    return out


def decode_request_spec(value: Any, path: str = "spec_obj") -> RequestSpec:
    """A RequestSpec primitive (any 1.x) -> :class:`RequestSpec` with nova's defaults."""
    _check_depth(value, path)
    d = unwrap(value, path, "RequestSpec")
    if "flavor" not in d or d["flavor"] is None:
        raise CodecError(f"{path}.flavor", "required field is missing")
    groups = _list(d.get("requested_resources") or [], f"{path}.requested_resources")
    return RequestSpec(
        flavor=decode_flavor(d["flavor"], f"{path}.flavor"),
        id=_field(d, "id", path, _opt_int, None),
        image=None if d.get("image") is None else decode_image(d["image"], f"{path}.image"),
        numa_topology=decode_numa_topology(d.get("numa_topology"), f"{path}.numa_topology"),
        pci_requests=decode_pci_requests(d.get("pci_requests"), f"{path}.pci_requests"),
        project_id=_field(d, "project_id", path, _opt_str, None),
        user_id=_field(d, "user_id", path, _opt_str, None),
        availability_zone=_field(d, "availability_zone", path, _opt_str, None),
        num_instances=_field(d, "num_instances", path, _opt_int, None) or 1,
        ignore_hosts=_field(d, "ignore_hosts", path, _opt_str_tuple, None),
        force_hosts=_field(d, "force_hosts", path, _opt_str_tuple, None),
        force_nodes=_field(d, "force_nodes", path, _opt_str_tuple, None),
        requested_destination=decode_destination(
            d.get("requested_destination"), f"{path}.requested_destination"
        ),
        retry=decode_retry(d.get("retry"), f"{path}.retry"),
        limits=decode_limits(d.get("limits"), f"{path}.limits"),
        instance_group=decode_instance_group(d.get("instance_group"), f"{path}.instance_group"),
        scheduler_hints=_decode_hints(d.get("scheduler_hints"), f"{path}.scheduler_hints"),
        instance_uuid=_field(d, "instance_uuid", path, _opt_str, None),
        security_groups=_decode_security_groups(
            d.get("security_groups"), f"{path}.security_groups"
        ),
        network_metadata=decode_network_metadata(
            d.get("network_metadata"), f"{path}.network_metadata"
        ),
        is_bfv=_field(d, "is_bfv", path, _opt_bool, None) or False,
        requested_resources=tuple(
            decode_request_group(g, f"{path}.requested_resources[{i}]")
            for i, g in enumerate(groups)
        ),
        request_level_params=decode_request_level_params(
            d.get("request_level_params"), f"{path}.request_level_params"
        ),
        requested_networks=_decode_networks(
            d.get("requested_networks"), f"{path}.requested_networks"
        ),
    )


# --------------------------------------------------------------------------------------------
# Legacy (< 4.3) request_spec + filter_properties dicts -> RequestSpec.


def _legacy_image(value: Any, path: str) -> ImageMeta | None:
    """Glance-style image dict: raw property names, ``trait:X=required`` becomes a trait."""
    if value is None:
        return None
    d = _dict(value, path)
    if NAME in d:
        return decode_image(d, path)
    raw_props = _dict(d.get("properties") or {}, f"{path}.properties")
    fields: dict[str, Any] = {}
    traits = set()
    for key, val in raw_props.items():
        if key.startswith("trait:"):
            if str(val).strip().lower() == "required":
                traits.add(key[len("trait:") :])
            continue
        fields[_LEGACY_IMAGE_PROPS.get(key, key)] = val
    if traits:
        fields["traits_required"] = sorted(traits)
    image_fields = {k: v for k, v in d.items() if k != "properties"}
    return ImageMeta(
        id=_field(image_fields, "id", path, _opt_str, None),
        name=_field(image_fields, "name", path, _opt_str, None),
        status=_field(image_fields, "status", path, _opt_str, None),
        disk_format=_field(image_fields, "disk_format", path, _opt_str, None),
        container_format=_field(image_fields, "container_format", path, _opt_str, None),
        owner=_field(image_fields, "owner", path, _opt_str, None),
        size=_field(image_fields, "size", path, _opt_int, None),
        min_ram=_field(image_fields, "min_ram", path, _opt_int, None),
        min_disk=_field(image_fields, "min_disk", path, _opt_int, None),
        properties=_image_props_from_fields(fields, f"{path}.properties"),
    )


def request_spec_from_legacy(
    request_spec: Any, filter_properties: Any, path: str = "request_spec"
) -> RequestSpec:
    """nova's ``RequestSpec.from_primitives``: the pre-4.3 dict pair -> :class:`RequestSpec`.

    ``request_spec`` carries image, instance_type (the flavor), instance_properties (project,
    user, availability_zone, numa_topology, pci_requests, uuid) and num_instances;
    ``filter_properties`` carries scheduler_hints, group_*, force_*/ignore_hosts, retry, limits
    and pci_requests.
    """
    _check_depth(request_spec, path)
    _check_depth(filter_properties, "filter_properties")
    spec = _dict(request_spec, path)
    fp = _dict(filter_properties if filter_properties is not None else {}, "filter_properties")
    flavor_raw = spec.get("instance_type") or fp.get("instance_type")
    if flavor_raw is None:
        raise CodecError(f"{path}.instance_type", "required field is missing")
    flavor = decode_flavor(flavor_raw, f"{path}.instance_type")
    props = _dict(spec.get("instance_properties") or {}, f"{path}.instance_properties")
    pp = f"{path}.instance_properties"

    group: InstanceGroup | None = None
    hints = _decode_hints(fp.get("scheduler_hints"), "filter_properties.scheduler_hints")
    if fp.get("group_updated") or fp.get("group_policies") or fp.get("group_hosts"):
        policies = _opt_str_tuple(fp.get("group_policies"), "filter_properties.group_policies")
        group_uuid = hints.get("group", ("",))[0]
        group = InstanceGroup(
            uuid=group_uuid,
            policy=policies[0] if policies else None,
            policies=policies or (),
            hosts=_opt_str_tuple(fp.get("group_hosts"), "filter_properties.group_hosts") or (),
            members=_opt_str_tuple(fp.get("group_members"), "filter_properties.group_members")
            or (),
        )

    retry: SchedulerRetries | None = None
    raw_retry = fp.get("retry")
    if raw_retry is not None:
        r = _dict(raw_retry, "filter_properties.retry")
        hosts = []
        for i, pair in enumerate(_list(r.get("hosts") or [], "filter_properties.retry.hosts")):
            hp = _str_tuple(pair, f"filter_properties.retry.hosts[{i}]")
            if len(hp) >= 2:
                hosts.append((hp[0], hp[1]))
        retry = SchedulerRetries(
            num_attempts=_int(r.get("num_attempts", 0), "filter_properties.retry.num_attempts"),
            hosts=tuple(hosts),
        )

    limits: SchedulerLimits | None = None
    raw_limits = fp.get("limits")
    if raw_limits is not None:
        ld = _dict(raw_limits, "filter_properties.limits")
        limits = decode_limits(ld, "filter_properties.limits")

    pci_raw = props.get("pci_requests") or fp.get("pci_requests")
    return RequestSpec(
        flavor=flavor,
        image=_legacy_image(spec.get("image"), f"{path}.image"),
        numa_topology=decode_numa_topology(props.get("numa_topology"), f"{pp}.numa_topology"),
        pci_requests=decode_pci_requests(pci_raw, f"{pp}.pci_requests"),
        project_id=_field(props, "project_id", pp, _opt_str, None),
        user_id=_field(props, "user_id", pp, _opt_str, None),
        availability_zone=_field(props, "availability_zone", pp, _opt_str, None),
        num_instances=_opt_int(spec.get("num_instances"), f"{path}.num_instances") or 1,
        ignore_hosts=_opt_str_tuple(fp.get("ignore_hosts"), "filter_properties.ignore_hosts"),
        force_hosts=_opt_str_tuple(fp.get("force_hosts"), "filter_properties.force_hosts"),
        force_nodes=_opt_str_tuple(fp.get("force_nodes"), "filter_properties.force_nodes"),
        retry=retry,
        limits=limits,
        instance_group=group,
        scheduler_hints=hints,
        instance_uuid=_field(props, "uuid", pp, _opt_str, None),
    )


# --------------------------------------------------------------------------------------------
# Aggregates and instance lists (the fanout casts).


def decode_aggregate(value: Any, path: str = "aggregate") -> Aggregate:
    d = unwrap(value, path, "Aggregate")
    return Aggregate(
        id=_required(d, "id", path, _int),
        uuid=_field(d, "uuid", path, _opt_str, None) or "",
        name=_field(d, "name", path, _opt_str, None) or "",
        hosts=_str_tuple(d.get("hosts") or [], f"{path}.hosts"),
        metadata=_field(d, "metadata", path, _str_dict, {}),
    )


def decode_aggregates(value: Any, path: str = "aggregates") -> tuple[Aggregate, ...]:
    """``update_aggregates`` sends one Aggregate, a list of them, or an AggregateList."""
    if isinstance(value, dict) and value.get(NAME) == "Aggregate":
        return (decode_aggregate(value, path),)
    items = _objects(value, path, "AggregateList")
    return tuple(decode_aggregate(a, f"{path}[{i}]") for i, a in enumerate(items))


def encode_aggregate(agg: Aggregate) -> dict[str, Any]:
    return wrap(
        "Aggregate",
        {
            "id": agg.id,
            "uuid": agg.uuid,
            "name": agg.name,
            "hosts": list(agg.hosts),
            "metadata": dict(agg.metadata),
        },
    )


def decode_instance_uuids(value: Any, path: str = "instance_info") -> tuple[str, ...]:
    """Instance uuids of an InstanceList primitive (or a plain list of Instance/uuid)."""
    uuids = []
    for i, item in enumerate(_objects(value, path, "InstanceList")):
        p = f"{path}[{i}]"
        if isinstance(item, str):
            uuids.append(item)
            continue
        inst = unwrap(item, p, "Instance")
        uuids.append(_required(inst, "uuid", p, _str))
    return tuple(uuids)


def encode_instance_list(instance_uuids: Sequence[str], host: str | None = None) -> dict[str, Any]:
    """A minimal InstanceList primitive, as ``update_instance_info`` carries it."""
    objects = []
    for uuid in instance_uuids:
        data: dict[str, Any] = {"uuid": uuid}
        if host is not None:
            data["host"] = host
        objects.append(wrap("Instance", data))
    return wrap("InstanceList", {"objects": objects})


# --------------------------------------------------------------------------------------------
# Selections (the reply).


def encode_network_metadata(nm: NetworkMetadata) -> dict[str, Any]:
    return wrap("NetworkMetadata", {"physnets": sorted(nm.physnets), "tunneled": nm.tunneled})


def _encode_numa_limits(numa: NUMATopologyLimits) -> dict[str, Any]:
    data: dict[str, Any] = {
        "cpu_allocation_ratio": numa.cpu_allocation_ratio,
        "ram_allocation_ratio": numa.ram_allocation_ratio,
    }
    if numa.network_metadata is not None:
        data["network_metadata"] = encode_network_metadata(numa.network_metadata)
    return wrap("NUMATopologyLimits", data)


def encode_limits(limits: SchedulerLimits | None) -> dict[str, Any]:
    """SchedulerLimits 1.0 with every field set (None when unknown), as from_host_state does."""
    lim = limits or SchedulerLimits()
    return wrap(
        "SchedulerLimits",
        {
            "numa_topology": None
            if lim.numa_topology is None
            else _encode_numa_limits(lim.numa_topology),
            "vcpu": lim.vcpu,
            "disk_gb": lim.disk_gb,
            "memory_mb": lim.memory_mb,
        },
    )


def limits_to_dict(limits: SchedulerLimits | None) -> dict[str, Any]:
    """nova's ``SchedulerLimits.to_dict``: only set values, NUMA limits as a primitive."""
    if limits is None:
        return {}
    out: dict[str, Any] = {}
    if limits.numa_topology is not None:
        out["numa_topology"] = _encode_numa_limits(limits.numa_topology)
    for name in ("vcpu", "disk_gb", "memory_mb"):
        val = getattr(limits, name)
        if val is not None:
            out[name] = val
    return out


def encode_selection(sel: Selection) -> dict[str, Any]:
    """Selection 1.1, every field set; ``allocation_request`` stays a JSON string."""
    return wrap(
        "Selection",
        {
            "compute_node_uuid": sel.compute_node_uuid,
            "service_host": sel.service_host,
            "nodename": sel.nodename,
            "cell_uuid": sel.cell_uuid,
            "limits": encode_limits(sel.limits),
            "allocation_request": sel.allocation_request,
            "allocation_request_version": sel.allocation_request_version,
            "availability_zone": sel.availability_zone,
        },
    )


def selection_to_dict(sel: Selection) -> dict[str, Any]:
    """The legacy (return_objects=False) form: ``{"host", "nodename", "limits"}``."""
    return {
        "host": sel.service_host,
        "nodename": sel.nodename,
        "limits": limits_to_dict(sel.limits),
    }


def encode_selections(selections: Sequence[Sequence[Selection]], return_objects: bool) -> list[Any]:
    """The select_destinations result: per-instance lists of primitives, or the legacy list.

    nova's legacy reply is one dict per instance (the selected host only, no alternates).
    """
    if return_objects:
        return [[encode_selection(s) for s in per_instance] for per_instance in selections]
    return [selection_to_dict(per_instance[0]) for per_instance in selections if per_instance]


def decode_selection(value: Any, path: str = "selection") -> Selection:
    d = unwrap(value, path, "Selection")
    return Selection(
        compute_node_uuid=_required(d, "compute_node_uuid", path, _str),
        service_host=_required(d, "service_host", path, _str),
        nodename=_required(d, "nodename", path, _str),
        cell_uuid=_required(d, "cell_uuid", path, _str),
        limits=decode_limits(d.get("limits"), f"{path}.limits"),
        allocation_request=_field(d, "allocation_request", path, _opt_str, None),
        allocation_request_version=_field(d, "allocation_request_version", path, _opt_str, None),
        availability_zone=_field(d, "availability_zone", path, _opt_str, None),
    )


# --------------------------------------------------------------------------------------------
# Encoding a RequestSpec (test helpers and the demo build realistic calls with it).


def encode_flavor(f: Flavor) -> dict[str, Any]:
    return wrap(
        "Flavor",
        {
            "id": f.id,
            "name": f.name,
            "memory_mb": f.memory_mb,
            "vcpus": f.vcpus,
            "root_gb": f.root_gb,
            "ephemeral_gb": f.ephemeral_gb,
            "flavorid": f.flavorid,
            "swap": f.swap,
            "rxtx_factor": f.rxtx_factor,
            "vcpu_weight": f.vcpu_weight,
            "disabled": f.disabled,
            "is_public": f.is_public,
            "extra_specs": dict(f.extra_specs),
            "description": f.description,
        },
    )


def encode_image_props(p: ImageMetaProps) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in _TYPED_PROPS:
        val = getattr(p, name)
        if name == "traits_required":
            if val:
                data[name] = sorted(val)
        elif val is not None:
            data[name] = val
    data.update(p.other)
    return wrap("ImageMetaProps", data)


def encode_image(i: ImageMeta) -> dict[str, Any]:
    data: dict[str, Any] = {
        name: getattr(i, name)
        for name in (
            "id",
            "name",
            "status",
            "disk_format",
            "container_format",
            "owner",
            "size",
            "min_ram",
            "min_disk",
        )
        if getattr(i, name) is not None
    }
    data["properties"] = encode_image_props(i.properties)
    return wrap("ImageMeta", data)


def encode_numa_topology(t: InstanceNUMATopology) -> dict[str, Any]:
    cells = []
    for c in t.cells:
        data: dict[str, Any] = {
            "id": c.id,
            "cpuset": sorted(c.cpuset),
            "pcpuset": sorted(c.pcpuset),
            "memory": c.memory,
            "pagesize": c.pagesize,
            "cpu_policy": c.cpu_policy,
            "cpu_thread_policy": c.cpu_thread_policy,
        }
        if c.cpuset_reserved is not None:
            data["cpuset_reserved"] = sorted(c.cpuset_reserved)
        if c.cpu_topology is not None:
            data["cpu_topology"] = wrap(
                "VirtCPUTopology",
                {
                    "sockets": c.cpu_topology.sockets,
                    "cores": c.cpu_topology.cores,
                    "threads": c.cpu_topology.threads,
                },
            )
        if c.cpu_pinning is not None:
            data["cpu_pinning_raw"] = {str(k): v for k, v in c.cpu_pinning.items()}
        cells.append(wrap("InstanceNUMACell", data))
    return wrap(
        "InstanceNUMATopology",
        {
            "instance_uuid": t.instance_uuid,
            "cells": cells,
            "emulator_threads_policy": t.emulator_threads_policy,
        },
    )


def encode_pci_requests(r: InstancePCIRequests) -> dict[str, Any]:
    reqs = [
        wrap(
            "InstancePCIRequest",
            {
                "count": q.count,
                "spec": [dict(s) for s in q.spec],
                "alias_name": q.alias_name,
                "is_new": q.is_new,
                "request_id": q.request_id,
                "requester_id": q.requester_id,
                "numa_policy": q.numa_policy,
            },
        )
        for q in r.requests
    ]
    data: dict[str, Any] = {"requests": reqs}
    if r.instance_uuid is not None:
        data["instance_uuid"] = r.instance_uuid
    return wrap("InstancePCIRequests", data)


def encode_instance_group(g: InstanceGroup) -> dict[str, Any]:
    return wrap(
        "InstanceGroup",
        {
            "id": g.id,
            "uuid": g.uuid,
            "name": g.name,
            "user_id": g.user_id,
            "project_id": g.project_id,
            "policy": g.policy,
            "policies": list(g.policies),
            "members": list(g.members),
            "hosts": list(g.hosts),
            "_rules": dict(g.rules),
        },
    )


def encode_destination(d: Destination) -> dict[str, Any]:
    data: dict[str, Any] = {
        "host": d.host,
        "node": d.node,
        "aggregates": list(d.aggregates) if d.aggregates else None,
        "forbidden_aggregates": sorted(d.forbidden_aggregates),
        "allow_cross_cell_move": d.allow_cross_cell_move,
    }
    if d.cell is not None:
        data["cell"] = wrap(
            "CellMapping",
            {
                "id": d.cell.id,
                "uuid": d.cell.uuid,
                "name": d.cell.name,
                "disabled": d.cell.disabled,
            },
        )
    return wrap("Destination", data)


def encode_retry(r: SchedulerRetries) -> dict[str, Any]:
    nodes = [wrap("ComputeNode", {"host": h, "hypervisor_hostname": n}) for h, n in r.hosts]
    return wrap(
        "SchedulerRetries",
        {"num_attempts": r.num_attempts, "hosts": wrap("ComputeNodeList", {"objects": nodes})},
    )


def encode_request_group(g: RequestGroup) -> dict[str, Any]:
    return wrap(
        "RequestGroup",
        {
            "use_same_provider": g.use_same_provider,
            "resources": dict(g.resources),
            "required_traits": sorted(g.required_traits),
            "forbidden_traits": sorted(g.forbidden_traits),
            "aggregates": [list(a) for a in g.aggregates],
            "forbidden_aggregates": sorted(g.forbidden_aggregates),
            "requester_id": g.requester_id,
            "provider_uuids": list(g.provider_uuids),
            "in_tree": g.in_tree,
        },
    )


def encode_request_level_params(p: RequestLevelParams) -> dict[str, Any]:
    return wrap(
        "RequestLevelParams",
        {
            "root_required": sorted(p.root_required),
            "root_forbidden": sorted(p.root_forbidden),
            "same_subtree": [list(s) for s in p.same_subtree],
        },
    )


def encode_request_spec(spec: RequestSpec) -> dict[str, Any]:
    """Our :class:`RequestSpec` -> a RequestSpec 1.15 primitive as nova-conductor sends it."""
    data: dict[str, Any] = {
        "flavor": encode_flavor(spec.flavor),
        "image": None if spec.image is None else encode_image(spec.image),
        "numa_topology": None
        if spec.numa_topology is None
        else encode_numa_topology(spec.numa_topology),
        "pci_requests": None
        if spec.pci_requests is None
        else encode_pci_requests(spec.pci_requests),
        "project_id": spec.project_id,
        "user_id": spec.user_id,
        "availability_zone": spec.availability_zone,
        "num_instances": spec.num_instances,
        "ignore_hosts": None if spec.ignore_hosts is None else list(spec.ignore_hosts),
        "force_hosts": None if spec.force_hosts is None else list(spec.force_hosts),
        "force_nodes": None if spec.force_nodes is None else list(spec.force_nodes),
        "requested_destination": None
        if spec.requested_destination is None
        else encode_destination(spec.requested_destination),
        "retry": None if spec.retry is None else encode_retry(spec.retry),
        "limits": None if spec.limits is None else encode_limits(spec.limits),
        "instance_group": None
        if spec.instance_group is None
        else encode_instance_group(spec.instance_group),
        "scheduler_hints": {k: list(v) for k, v in spec.scheduler_hints.items()},
        "instance_uuid": spec.instance_uuid,
        "security_groups": wrap(
            "SecurityGroupList",
            {"objects": [wrap("SecurityGroup", {"name": n}) for n in spec.security_groups]},
        ),
        "network_metadata": encode_network_metadata(spec.network_metadata),
        "is_bfv": spec.is_bfv,
        "requested_resources": [encode_request_group(g) for g in spec.requested_resources],
        "request_level_params": encode_request_level_params(spec.request_level_params),
        "requested_networks": wrap(
            "NetworkRequestList",
            {
                "objects": [
                    wrap(
                        "NetworkRequest",
                        {
                            k: getattr(n, k)
                            for k in NetworkRequest.__dataclass_fields__
                            if getattr(n, k) is not None
                        },
                    )
                    for n in spec.requested_networks
                ]
            },
        ),
    }
    if spec.id is not None:
        data["id"] = spec.id
    return wrap("RequestSpec", data)


# --------------------------------------------------------------------------------------------
# Request context.

_CONTEXT_PREFIX = "_context_"
_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ")


def _ctx_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None


def decode_context(message: Mapping[str, Any]) -> RequestContext:
    """The ``_context_*`` keys of an inner message -> :class:`RequestContext`.

    Never fails: a context value of the wrong type is dropped (it only feeds logging and
    tenant-aware filters, and must not cost a request). Unknown keys are kept in ``raw``; the
    auth token is kept out of ``raw`` so it cannot end up in a log line.
    """
    ctx: dict[str, Any] = {
        key[len(_CONTEXT_PREFIX) :]: val
        for key, val in message.items()
        if isinstance(key, str) and key.startswith(_CONTEXT_PREFIX)
    }
    token = ctx.pop("auth_token", None)
    roles_raw = ctx.get("roles")
    roles = tuple(r for r in roles_raw if isinstance(r, str)) if isinstance(roles_raw, list) else ()
    read_deleted = ctx.get("read_deleted")
    return RequestContext(
        request_id=_ctx_str(ctx.get("request_id")),
        global_request_id=_ctx_str(ctx.get("global_request_id")),
        user_id=_ctx_str(ctx.get("user_id")) or _ctx_str(ctx.get("user")),
        project_id=_ctx_str(ctx.get("project_id"))
        or _ctx_str(ctx.get("project"))
        or _ctx_str(ctx.get("tenant")),
        user_name=_ctx_str(ctx.get("user_name")),
        project_name=_ctx_str(ctx.get("project_name")),
        roles=roles,
        is_admin=ctx.get("is_admin") is True,
        read_deleted=read_deleted if isinstance(read_deleted, str) else "no",
        timestamp=_parse_time(ctx.get("timestamp")),
        remote_address=_ctx_str(ctx.get("remote_address")),
        auth_token=_ctx_str(token),
        raw=ctx,
    )


def encode_context(ctx: RequestContext) -> dict[str, Any]:
    """A context dict (without prefix) as nova's ``RequestContext.to_dict`` shapes it."""
    out: dict[str, Any] = dict(ctx.raw)
    out.update(
        {
            "request_id": ctx.request_id,
            "global_request_id": ctx.global_request_id,
            "user_id": ctx.user_id,
            "user": ctx.user_id,
            "project_id": ctx.project_id,
            "project": ctx.project_id,
            "user_name": ctx.user_name,
            "project_name": ctx.project_name,
            "roles": list(ctx.roles),
            "is_admin": ctx.is_admin,
            "read_deleted": ctx.read_deleted,
            "timestamp": None
            if ctx.timestamp is None
            else ctx.timestamp.strftime("%Y-%m-%dT%H:%M:%S.%f"),
            "remote_address": ctx.remote_address,
            "auth_token": ctx.auth_token,
        }
    )
    return out
