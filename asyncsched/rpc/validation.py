"""What a request may ask for, checked before any work is done for it.

Two steps, both raising ``CodecError`` (the server answers it as oslo's ``ValueError``
"Malformed request: <field>: <problem>", naming the field):

* ``check_message``: the shape of any inner message, before dispatch. Nesting depth, string
  lengths and strings that are not valid Unicode (a lone surrogate cannot be encoded into a
  Placement URL or a log line). Message size is bounded earlier, on the raw bytes.
* ``check_select_destinations``: the decoded request, before the scheduler sees it. How many
  instances (an absurd legacy ``num_instances`` once ate 5.8 GB), instance uuids that are not
  UUIDs or repeat (they become Placement consumer URLs), and trait and resource-class names that
  Placement's own schemas would refuse (``placement/schemas/common.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncsched.objects.codec import CodecError
from asyncsched.objects.models import RequestSpec
from asyncsched.placement.query import EXTRA_SPEC_KEY
from asyncsched.placement.traits import is_valid_resource_class

# Nova's deepest request (numa cells in a RequestSpec inside args) is ~14 levels from the root.
MAX_DEPTH = 32
# Nova's longest free text in a request is a flavor description (65535 characters).
MAX_STRING = 65536
# Placement: names match ^[A-Z0-9_]+$ and are at most 255 long; consumers are 36 uuid chars
# (we want the canonical 8-4-4-4-12 form nova generates).
PLACEMENT_NAME = re.compile(r"[A-Z0-9_]{1,255}")
UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# repr() of a string escapes these, so a path or name shown with it is always encodable.
_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class RequestBounds:
    """The configurable bounds (``[asyncsched]``); the rest are fixed above."""

    max_instances: int = 10000


# --------------------------------------------------------------------------------------------
# Any message.


def _child(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    return f"{path}.{text}" if _PLAIN_KEY.fullmatch(text) else f"{path}[{text!r}]"


def _check_string(text: str, path: str) -> None:
    if len(text) > MAX_STRING:
        raise CodecError(path, f"string of {len(text)} characters (at most {MAX_STRING})")
    bad = _SURROGATE.search(text)
    if bad is not None:
        raise CodecError(
            path, f"not valid Unicode: lone surrogate {bad.group()!a} in {text[:80]!r}"
        )


def check_message(inner: Mapping[str, Any]) -> None:
    """Depth and strings of a parsed inner message; iterative, linear in its size.

    A first walk builds no field paths (on every message, it is most of the cost); only a
    message it finds fault with is walked again to name the field. This is the one walk over
    a call's message: the decoders it hands to are told the nesting is bounded already
    (``nesting_checked``), and do not walk the RequestSpec again."""
    if _faulty(inner):
        _check_named(inner)
        raise CodecError("message", "malformed")  # the named walk raised first: not reached


def _bad_strings(strings: list[str]) -> bool:
    """Any string too long or not valid Unicode: the length and ASCII tests run in C over the
    whole list; only non-ASCII strings meet the surrogate pattern."""
    if not strings:
        return False
    if max(map(len, strings)) > MAX_STRING:
        return True
    if all(map(str.isascii, strings)):
        return False
    return any(_SURROGATE.search(text) is not None for text in strings if not text.isascii())


def _faulty(inner: Mapping[str, Any]) -> bool:
    """One level of nesting at a time: the depth is checked once per level, the level's keys
    and string values in one batch (``_bad_strings``)."""
    level: list[Any] = [inner]
    for _ in range(MAX_DEPTH):
        strings: list[str] = []
        below: list[Any] = []
        for value in level:
            items: Iterable[Any] = value
            if not isinstance(value, list):
                strings.extend(map(str, value))
                items = value.values()
            for item in items:
                if isinstance(item, str):
                    strings.append(item)
                elif isinstance(item, dict | list):
                    below.append(item)
        if _bad_strings(strings):
            return True
        if not below:
            return False
        level = below
    return True  # containers at depth MAX_DEPTH


def _check_named(inner: Mapping[str, Any]) -> None:
    """The walk that names the field: raises ``CodecError`` for the first fault it meets."""
    stack: list[tuple[Any, str, int]] = [(inner, "message", 0)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, str):
            _check_string(value, path)
            continue
        if not isinstance(value, dict | list):
            continue
        if depth >= MAX_DEPTH:
            raise CodecError(path, f"nested deeper than {MAX_DEPTH} levels")
        items: Iterable[tuple[object, Any]]
        if isinstance(value, dict):
            for key in value:
                _check_string(str(key), _child(path, key))
            items = value.items()
        else:
            items = enumerate(value)
        stack.extend((item, _child(path, key), depth + 1) for key, item in items)


# --------------------------------------------------------------------------------------------
# select_destinations.


def check_select_destinations(
    spec: RequestSpec,
    instance_uuids: Sequence[str] | None,
    bounds: RequestBounds,
    *,
    spec_path: str = "args.spec_obj",
    uuids_path: str = "args.instance_uuids",
) -> None:
    """Refuse what would make the scheduler or Placement fail on this request."""
    allowed = f"[asyncsched] max_instances_per_request allows 1 to {bounds.max_instances}"
    if not 1 <= spec.num_instances <= bounds.max_instances:
        raise CodecError(
            f"{spec_path}.num_instances", f"{spec.num_instances} instances requested; {allowed}"
        )
    if instance_uuids is not None:
        if len(instance_uuids) > bounds.max_instances:
            raise CodecError(uuids_path, f"{len(instance_uuids)} instances requested; {allowed}")
        _check_instance_uuids(instance_uuids, uuids_path)
    for name, kind, field in _placement_names(spec, spec_path):
        if not PLACEMENT_NAME.fullmatch(name):
            raise CodecError(
                field,
                f"{kind} name {name!r} is not one Placement accepts "
                "(^[A-Z0-9_]+$, at most 255 characters)",
            )


def _check_instance_uuids(instance_uuids: Sequence[str], path: str) -> None:
    seen: dict[str, int] = {}
    for i, value in enumerate(instance_uuids):
        if not UUID.fullmatch(value):
            raise CodecError(f"{path}[{i}]", f"{value!r} is not a UUID")
        first = seen.setdefault(value.lower(), i)
        if first != i:
            raise CodecError(f"{path}[{i}]", f"{value} repeats {path}[{first}]")


def _placement_names(spec: RequestSpec, path: str) -> Iterator[tuple[str, str, str]]:
    """(name, "trait"/"resource class", field) for every name the request sends to Placement."""
    base = f"{path}.flavor.extra_specs"
    for key, value in spec.flavor.extra_specs.items():
        m = EXTRA_SPEC_KEY.match(key)
        if m is None:
            continue
        prefix, _, name = m.groups()
        field = f"{base}[{key!r}]"
        if prefix == "trait" and value in ("required", "forbidden"):
            yield name, "trait", field
        elif prefix == "resources" and is_valid_resource_class(name):
            # nova itself skips other names with a warning; these it would send to Placement.
            yield name, "resource class", field
    for trait in sorted(spec.image_props.traits_required):
        yield trait, "trait", f"{path}.image.properties.traits_required"
    for i, group in enumerate(spec.requested_resources):
        field = f"{path}.requested_resources[{i}]"
        for rc in group.resources:
            yield rc, "resource class", f"{field}.resources"
        for trait in sorted(group.required_traits | group.forbidden_traits):
            yield trait, "trait", f"{field}.required_traits/forbidden_traits"
    rlp = spec.request_level_params
    for trait in sorted(rlp.root_required | rlp.root_forbidden):
        yield trait, "trait", f"{path}.request_level_params.root_required/root_forbidden"
