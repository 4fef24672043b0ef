"""Typed health snapshots: what a component's ``health()`` returns.

Why: the admin endpoint's metrics and readiness read these snapshots. As frozen dataclasses
(subclasses of :class:`Snapshot`) a field renamed on one side is a type error on the other,
not a metric that silently goes missing. Readers in the package use the attributes.

The JSON form (``as_json``: field order, nested snapshots as objects) is what ``/v1/status``
and the health file publish. A snapshot is also a read-only ``Mapping`` over that JSON form,
so a tool or test reading ``snapshot["cells"][uuid]["stale"]`` sees exactly the document.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

S = TypeVar("S", bound="Snapshot")


class Snapshot(Mapping[str, Any]):
    """Base of every health snapshot; subclasses are ``@dataclass(frozen=True, slots=True)``."""

    __slots__ = ()

    def as_json(self) -> dict[str, Any]:
        """The document: one key per field, in field order, nested snapshots as dicts."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return _plain(getattr(self, key))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(self))  # type: ignore[arg-type]


def _plain(value: Any) -> Any:
    if isinstance(value, Snapshot):
        return value.as_json()
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class HealthFailed(Snapshot):
    """A component whose ``health()`` raised: the error, never the caller's crash."""

    error: str


@dataclass(frozen=True, slots=True)
class ServiceHealth(Snapshot):
    """``Service.health()``: the service state and each component's snapshot by name."""

    state: str
    components: Mapping[str, Snapshot]

    def part(self, name: str, kind: type[S]) -> S | None:
        """The component ``name`` if it reported a ``kind``; None if it is absent, its
        health() failed, or it reported something else."""
        got = self.components.get(name)
        return got if isinstance(got, kind) else None
