"""The select_destinations reply: Selection 1.1 primitives or the legacy host dicts."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from asyncsched.objects.codec.limits import decode_limits, encode_limits, limits_to_dict
from asyncsched.objects.codec.primitives import (
    as_str,
    field,
    opt_str,
    required,
    unwrap,
    wrap,
)
from asyncsched.objects.models import (
    Selection,
)


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
        compute_node_uuid=required(d, "compute_node_uuid", path, as_str),
        service_host=required(d, "service_host", path, as_str),
        nodename=required(d, "nodename", path, as_str),
        cell_uuid=required(d, "cell_uuid", path, as_str),
        limits=decode_limits(d.get("limits"), f"{path}.limits"),
        allocation_request=field(d, "allocation_request", path, opt_str, None),
        allocation_request_version=field(d, "allocation_request_version", path, opt_str, None),
        availability_zone=field(d, "availability_zone", path, opt_str, None),
    )
