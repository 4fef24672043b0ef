"""A Recorder that keeps every call, for tests of what the layers report."""

from __future__ import annotations

from typing import Any


class RecordingRecorder:
    """Each Recorder method appends ``(name, *args)`` to ``calls``."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [c[1:] for c in self.calls if c[0] == name]

    def rpc_call(self, method: str, outcome: str, seconds: float) -> None:
        self.calls.append(("rpc_call", method, outcome, seconds))

    def phase(self, phase: str, seconds: float) -> None:
        self.calls.append(("phase", phase, seconds))

    def scheduled(self, instances: int) -> None:
        self.calls.append(("scheduled", instances))

    def no_valid_host(self, reason: str) -> None:
        self.calls.append(("no_valid_host", reason))

    def claim_replaced(self) -> None:
        self.calls.append(("claim_replaced",))

    def rollback(self, claims: int) -> None:
        self.calls.append(("rollback", claims))

    def placement_call(self, call: str, status: str, seconds: float) -> None:
        self.calls.append(("placement_call", call, status, seconds))

    def refresh(self, cell: str, kind: str, seconds: float, ok: bool) -> None:
        self.calls.append(("refresh", cell, kind, seconds, ok))
