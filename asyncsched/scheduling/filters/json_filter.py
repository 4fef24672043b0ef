"""JsonFilter: hint ``query``, a JSON expression over host attributes."""

from __future__ import annotations

import ipaddress
import json
import operator
from collections.abc import Callable
from typing import Any

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


def _compare(op: Callable[[Any, Any], bool]) -> Callable[[list[Any]], bool]:
    def run(args: list[Any]) -> bool:
        if len(args) < 2:
            return False
        try:
            return all(op(args[0], a) for a in args[1:])
        except TypeError:
            return False

    return run


def _in(args: list[Any]) -> bool:
    return len(args) >= 2 and args[0] in args[1:]


_COMMANDS: dict[str, Callable[[list[Any]], Any]] = {
    "=": _compare(operator.eq),
    "<": _compare(operator.lt),
    ">": _compare(operator.gt),
    "in": _in,
    "<=": _compare(operator.le),
    ">=": _compare(operator.ge),
    "not": lambda args: [not a for a in args],
    "or": any,
    "and": all,
}


def _ip(text: str) -> Any:
    """nova's ``host_ip`` is a netaddr.IPAddress: equal to no string, and ordering it against
    one raises TypeError (which fails the comparison here, and nova's whole request)."""
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return text


def _lookup(value: str, state: HostState) -> Any:
    if not value:
        return None
    if not value.startswith("$"):
        return value
    path = value[1:].split(".")
    obj: Any = getattr(state, path[0], None)
    if path[0] == "host_ip" and isinstance(obj, str):
        obj = _ip(obj)
    for item in path[1:]:
        if obj is None:
            return None
        obj = obj.get(item) if isinstance(obj, dict) else getattr(obj, item, None)
    return obj


def evaluate(query: Any, state: HostState) -> Any:
    """nova's recursive evaluation; unknown operators make the host fail (no exception)."""
    if not query:
        return True
    command = _COMMANDS.get(query[0]) if isinstance(query[0], str) else None
    if command is None:
        raise ValueError(f"unknown JsonFilter operator {query[0]!r}")
    args: list[Any] = []
    for arg in query[1:]:
        if isinstance(arg, list):
            arg = evaluate(arg, state)
        elif isinstance(arg, str):
            arg = _lookup(arg, state)
        if arg is not None:
            args.append(arg)
    return command(args)


class JsonFilter(BaseHostFilter):
    name = "JsonFilter"

    def is_active(self, spec: RequestSpec) -> bool:
        return bool(spec.get_scheduler_hint("query"))

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        query = spec.get_scheduler_hint("query")
        if not query:
            return None
        try:
            result = evaluate(json.loads(query), state)
        except (ValueError, TypeError, IndexError):
            return "json-invalid"
        if isinstance(result, list):
            result = any(result)
        return None if result else "json"

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)
