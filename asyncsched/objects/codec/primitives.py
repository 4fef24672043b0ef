"""The object wrapper and nova's field coercion rules, with the path in every error.

Every family module of the codec reads scalars and unwraps objects through these, so a
primitive is judged the same way wherever it appears.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from asyncsched.common.strings import TRUE_STRINGS
from asyncsched.exceptions import AsyncschedError

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
    # What compute nodes store in compute_nodes.numa_topology and .pci_stats.
    "NUMATopology": "1.2",
    "NUMACell": "1.5",
    "NUMAPagesTopology": "1.1",
    "PciDevicePoolList": "1.1",
    "PciDevicePool": "1.1",
}

# Nested primitives deeper than this are refused (a hostile message could nest forever).
MAX_DEPTH = 32


class CodecError(AsyncschedError, ValueError):
    """A primitive we cannot turn into a model value; ``path`` says where it went wrong."""

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"{path}: {problem}")


# --------------------------------------------------------------------------------------------
# Scalar readers: nova's field coercion rules, with the path in every error.


def type_name(value: Any) -> str:
    return type(value).__name__


def as_int(value: Any, path: str) -> int:
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
    raise CodecError(path, f"expected an integer, got {type_name(value)}")


def opt_int(value: Any, path: str) -> int | None:
    return None if value is None else as_int(value, path)


def as_float(value: Any, path: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise CodecError(path, f"expected a number, got {type_name(value)}")


def as_str(value: Any, path: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise CodecError(path, f"expected a string, got {type_name(value)}")


def opt_str(value: Any, path: str) -> str | None:
    return None if value is None else as_str(value, path)


_FALSE = {"false", "0", "no", "off", "n", "f", ""}


def as_bool(value: Any, path: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0
    if isinstance(value, str):
        low = value.strip().lower()
        if low in TRUE_STRINGS:
            return True
        if low in _FALSE:
            return False
    raise CodecError(path, f"expected a boolean, got {type_name(value)}")


def opt_bool(value: Any, path: str) -> bool | None:
    return None if value is None else as_bool(value, path)


def as_list(value: Any, path: str) -> list[Any]:
    if isinstance(value, list | tuple):
        return list(value)
    raise CodecError(path, f"expected a list, got {type_name(value)}")


def as_dict(value: Any, path: str) -> dict[str, Any]:
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise CodecError(path, "dict keys must be strings")
        return value
    raise CodecError(path, f"expected an object, got {type_name(value)}")


def str_tuple(value: Any, path: str) -> tuple[str, ...]:
    return tuple(as_str(v, f"{path}[{i}]") for i, v in enumerate(as_list(value, path)))


def opt_str_tuple(value: Any, path: str) -> tuple[str, ...] | None:
    return None if value is None else str_tuple(value, path)


def str_set(value: Any, path: str) -> frozenset[str]:
    return frozenset() if value is None else frozenset(str_tuple(value, path))


def int_set(value: Any, path: str) -> frozenset[int]:
    if value is None:
        return frozenset()
    return frozenset(as_int(v, f"{path}[{i}]") for i, v in enumerate(as_list(value, path)))


def str_dict(value: Any, path: str) -> dict[str, str]:
    if value is None:
        return {}
    out: dict[str, str] = {}
    for key, val in as_dict(value, path).items():
        if val is None:
            continue
        if isinstance(val, str):
            out[key] = val
        elif isinstance(val, dict | list):
            out[key] = json.dumps(val)
        else:
            out[key] = as_str(val, f"{path}.{key}")
    return out


def field(
    data: Mapping[str, Any], name: str, path: str, reader: Callable[[Any, str], T], default: T
) -> T:
    """Read one optional field; an absent key (unset in nova) gives ``default``."""
    if name not in data:
        return default
    return reader(data[name], f"{path}.{name}")


def required(data: Mapping[str, Any], name: str, path: str, reader: Callable[[Any, str], T]) -> T:
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
    obj = as_dict(value, path)
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
    return as_dict(data, f"{path}.{DATA}")


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


def object_items(value: Any, path: str, list_name: str) -> list[Any]:
    """Items of an ``XxxList`` object primitive, or of a plain JSON list."""
    if value is None:
        return []
    if isinstance(value, list | tuple):
        return list(value)
    data = unwrap(value, path, list_name)
    return as_list(data.get("objects", []), f"{path}.objects")


def check_depth(value: Any, path: str, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise CodecError(path, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        for v in value.values():
            check_depth(v, path, depth + 1)
    elif isinstance(value, list):
        for v in value:
            check_depth(v, path, depth + 1)


def opt_float(value: Any, path: str) -> float | None:
    return None if value is None else as_float(value, path)
