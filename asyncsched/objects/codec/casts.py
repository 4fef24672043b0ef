"""The fanout casts: aggregates and instance lists computes and the API send us."""

from __future__ import annotations

from typing import Any

from asyncsched.objects.codec.primitives import (
    NAME,
    as_int,
    as_str,
    field,
    object_items,
    opt_str,
    required,
    str_dict,
    str_tuple,
    unwrap,
)
from asyncsched.objects.models import (
    Aggregate,
)


def decode_aggregate(value: Any, path: str = "aggregate") -> Aggregate:
    d = unwrap(value, path, "Aggregate")
    return Aggregate(
        id=required(d, "id", path, as_int),
        uuid=field(d, "uuid", path, opt_str, None) or "",
        name=field(d, "name", path, opt_str, None) or "",
        hosts=str_tuple(d.get("hosts") or [], f"{path}.hosts"),
        metadata=field(d, "metadata", path, str_dict, {}),
    )


def decode_aggregates(value: Any, path: str = "aggregates") -> tuple[Aggregate, ...]:
    """``update_aggregates`` sends one Aggregate, a list of them, or an AggregateList."""
    if isinstance(value, dict) and value.get(NAME) == "Aggregate":
        return (decode_aggregate(value, path),)
    items = object_items(value, path, "AggregateList")
    return tuple(decode_aggregate(a, f"{path}[{i}]") for i, a in enumerate(items))


def decode_instance_uuids(value: Any, path: str = "instance_info") -> tuple[str, ...]:
    """Instance uuids of an InstanceList primitive (or a plain list of Instance/uuid)."""
    uuids = []
    for i, item in enumerate(object_items(value, path, "InstanceList")):
        p = f"{path}[{i}]"
        if isinstance(item, str):
            uuids.append(item)
            continue
        inst = unwrap(item, p, "Instance")
        uuids.append(required(inst, "uuid", p, as_str))
    return tuple(uuids)
