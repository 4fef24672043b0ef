"""Differences docs/parity.md lists under "Where asyncsched knowingly differs from nova".

Each rule recognises one documented case precisely: which answer differs, what nova answered
and what in the case causes it. Anything else is an unexplained difference. Keep this list and
docs/parity.md's in step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Check = Callable[[dict[str, Any], tuple[str, ...], Any, Any, dict[str, Any]], bool]


def _raised(answer: Any, exc: str) -> bool:
    return bool(answer == f"!{exc}")


def _orders_host_ip(case: dict[str, Any]) -> bool:
    """The JsonFilter query compares ``$host_ip`` with <, <=, > or >=."""

    def walk(q: Any) -> bool:
        if not isinstance(q, list) or not q:
            return False
        if q[0] in ("<", "<=", ">", ">=") and "$host_ip" in q[1:]:
            return True
        return any(walk(a) for a in q[1:])

    for text in case["request"]["hints"].get("query", []):
        try:
            if walk(json.loads(text)):
                return True
        except ValueError:
            continue
    return False


def _host_ip_crash(case: dict[str, Any], key: tuple[str, ...], nova: Any, mine: Any) -> bool:
    if not _orders_host_ip(case):
        return False
    if key == ("filters", "JsonFilter"):
        return _raised(nova, "TypeError") and mine == []
    if key == ("sequence",):  # nova's request fails where ours finds no host
        return bool(nova) and _raised(nova[-1], "TypeError") and mine[-1:] == [None]
    return False


def _maxphysaddr_crash(case: dict[str, Any], key: tuple[str, ...], nova: Any) -> bool:
    props = case["request"]["image_props"]
    if "hw_maxphysaddr_bits" not in props:
        return False
    if key == ("filters", "ImagePropertiesFilter"):
        return _raised(nova, "AttributeError")
    return key == ("sequence",) and bool(nova) and _raised(nova[-1], "AttributeError")


def _null_supported_instances(case: dict[str, Any], key: tuple[str, ...], nova: Any) -> bool:
    return (
        key == ("load",)
        and _raised(nova, "NotImplementedError")
        and any(h["row"].get("supported_instances") is None for h in case["hosts"])
    )


def _tie(key: tuple[str, ...], nova: Any, mine: Any, full: dict[str, Any]) -> bool:
    """At the first pick that differs, ours shared nova's best weight."""
    if key != ("sequence",) or not isinstance(mine, list):
        return False
    ties = full.get("sequence_ties", [])
    for i, (a, b) in enumerate(zip(nova, mine, strict=False)):
        if a != b:
            return i < len(ties) and a in ties[i] and b in ties[i]
    return False


def _consume_cut_short(
    case: dict[str, Any], key: tuple[str, ...], nova: Any, mine: Any, full: dict[str, Any]
) -> bool:
    """Before the first differing pick, nova picked a node whose PCI step of
    consume_from_request raises: the node cannot give the devices, or (with a NUMA request) it
    has no NUMA topology, so nova applies them to the unfitted guest cells. The decorator
    set_update_time_on_success swallows the error, leaving the devices and the I/O operation
    uncounted on that node."""
    if key != ("sequence",) or not isinstance(mine, list) or not case["request"]["pci_requests"]:
        return False
    numa_request = full.get("spec", {}).get("nova_object.data", {}).get("numa_topology")
    supports = full.get("pci", {})
    nodes = {h["node"]: h for h in case["hosts"]}
    for i, (a, b) in enumerate(zip(nova, mine, strict=False)):
        if a == b:
            continue
        for earlier in {x for x in nova[:i] if isinstance(x, str)}:
            h = nodes[earlier]
            if supports.get(earlier) is False or (
                numa_request is not None and h["row"].get("numa") is None
            ):
                return True
        return False
    return False


RULES: list[tuple[str, Check]] = [
    (
        "nova's JsonFilter raises TypeError when a query orders $host_ip (a netaddr.IPAddress) "
        "against a string, failing the request; asyncsched fails the host",
        lambda case, key, nova, mine, full: _host_ip_crash(case, key, nova, mine),
    ),
    (
        "nova's ImagePropertiesFilter raises AttributeError on hw_maxphysaddr_bits (it calls "
        ".get on the cpu_info JSON string); asyncsched reads the bits from the parsed cpu_info",
        lambda case, key, nova, mine, full: _maxphysaddr_crash(case, key, nova),
    ),
    (
        "nova cannot load a compute node whose supported_instances is NULL (every request "
        "fails); asyncsched treats it as supporting nothing",
        lambda case, key, nova, mine, full: _null_supported_instances(case, key, nova),
    ),
    (
        "nova's consume stops at the PCI step on a node that cannot give the devices (or has "
        "no NUMA topology for a NUMA request) and swallows the error: that node's devices and "
        "I/O operation go uncounted for the next instance of the batch; asyncsched counts what "
        "it can",
        _consume_cut_short,
    ),
    (
        "hosts tied at the best weight: asyncsched carries the host list to the next instance "
        "in its original order, nova in weighed order, so another tied host may be picked",
        lambda case, key, nova, mine, full: _tie(key, nova, mine, full),
    ),
]


def explain(
    case: dict[str, Any],
    key: tuple[str, ...],
    nova: Any,
    mine: Any,
    full: dict[str, Any] | None = None,
) -> str | None:
    """The documented reason for this difference, or None when it is not documented.

    ``full`` is nova's whole answer (the sequence rule needs its ties)."""
    for reason, applies in RULES:
        if applies(case, key, nova, mine, full or {}):
            return reason
    return None
