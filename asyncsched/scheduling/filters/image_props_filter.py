"""ImagePropertiesFilter: the host supports the image's arch / hypervisor type / vm mode."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Sequence
from typing import Any

from packaging.version import InvalidVersion, Version

from asyncsched.objects.image_props import canonical_enum
from asyncsched.objects.models import ImageMetaProps, RequestSpec
from asyncsched.scheduling.filters.base import BaseHostFilter, HostCandidate
from asyncsched.state.host_state import HostState


def _canonical(name: str, value: str | None) -> str | None:
    return None if value is None else canonical_enum(name, value)


def version_to_str(version: int) -> str:
    """oslo's convert_version_to_str: 6002001 -> '6.2.1'."""
    parts: list[str] = []
    while version != 0:
        parts.insert(0, str(version % 1000))
        version //= 1000
    return ".".join(parts)


_PRED = re.compile(r"^\s*(<=|>=|==|!=|<|>)\s*(\S+)\s*$")
_CMP = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
}


def version_satisfies(predicate: str, version: str) -> bool:
    """oslo VersionPredicate: comma-separated ``op version`` terms, all must hold, compared as
    packaging Versions as oslo does (so 8.0.0 == 8, and 8.0.0 >= 8). An unparsable term or
    version matches nothing (nova raises ValueError there and the request fails)."""
    terms = [_PRED.match(term) for term in predicate.split(",")]
    try:
        have = Version(version)
        wanted = [(m.group(1), Version(m.group(2))) for m in terms if m is not None]
    except InvalidVersion:
        return False
    if len(wanted) != len(terms):
        return False
    return all(_CMP[op](have, v) for op, v in wanted)


def _maxphysaddr_bits(cpu_info: str | None) -> Any:
    if not cpu_info:
        return None
    try:
        info = json.loads(cpu_info)
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    mpa = info.get("maxphysaddr")
    return mpa.get("bits") if isinstance(mpa, dict) else None


class ImagePropertiesFilter(BaseHostFilter):
    """Some ``supported_instances`` triple must hold every requested (arch, hv_type, vm_mode)."""

    name = "ImagePropertiesFilter"
    run_filter_once_per_request = True
    RUN_ON_REBUILD = True

    def _checked(self, props: ImageMetaProps) -> tuple[str | None, str | None, str | None]:
        default_arch = self.config.filter_scheduler.image_properties_default_architecture
        return (
            _canonical("hw_architecture", props.get("hw_architecture", default_arch)),
            _canonical("img_hv_type", props.get("img_hv_type")),
            _canonical("hw_vm_mode", props.get("hw_vm_mode")),
        )

    def is_active(self, spec: RequestSpec) -> bool:
        return any(self._checked(spec.image_props))

    def verdict_key(self, spec: RequestSpec) -> Hashable:
        props = spec.image_props
        return (
            self._checked(props),
            props.get("img_hv_requested_version"),
            props.get("hw_maxphysaddr_bits"),
        )

    def _passes(
        self, state: HostState, props: ImageMetaProps, checked: tuple[str | None, ...]
    ) -> str | None:
        if not any(checked):
            return None
        if not state.supported_instances:
            return "no-supported-instances"
        required = props.get("img_hv_requested_version")
        bits_required = props.get("hw_maxphysaddr_bits")
        for triple in state.supported_instances:
            if not all(c in triple for c in checked if c):
                continue
            if required and state.hypervisor_version:
                if not version_satisfies(required, version_to_str(state.hypervisor_version)):
                    continue
            if bits_required:
                bits = _maxphysaddr_bits(state.cpu_info)
                if bits and bits < bits_required:
                    continue
            return None
        return "image-properties"

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        props = spec.image_props
        return self._passes(state, props, self._checked(props))

    def host_passes(self, host: HostCandidate, spec: RequestSpec) -> str | None:
        return self.state_passes(host.state, spec)

    def filter_states(self, states: Sequence[HostState], spec: RequestSpec) -> list[str | None]:
        """One verdict per distinct (supported_instances, and what the request compares:
        hypervisor version, cpu_info): a cloud has few, and 10,000 hosts cost a lookup each.
        The host list is keyed by identity (the row parser hands equal lists out as one
        object; tuples do not cache their hash), which is exact while the states live."""
        props = spec.image_props
        checked = self._checked(props)
        if not any(checked):
            return [None] * len(states)
        by_version = bool(props.get("img_hv_requested_version"))
        by_cpu = bool(props.get("hw_maxphysaddr_bits"))
        memo: dict[Any, str | None] = {}
        out: list[str | None] = []
        for s in states:
            key: Any = (
                (id(s.supported_instances), s.hypervisor_version, s.cpu_info)
                if by_version or by_cpu
                else id(s.supported_instances)
            )
            if key in memo:
                out.append(memo[key])
            else:
                out.append(memo.setdefault(key, self._passes(s, props, checked)))
        return out
