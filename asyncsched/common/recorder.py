"""What the layers report as it happens, for metrics; the shell decides what it becomes.

Counters a component already keeps (``stats``, ``health()``) are read at scrape time by
``asyncsched.admin.metrics``; this protocol carries only what has to be seen at the moment it
happens (durations, and events nothing counted before). Layers receive a ``Recorder`` and
default to :data:`NO_RECORDER`, so they and their tests need nothing from the shell above.

Label values passed here must come from small fixed sets (method names, outcomes, phases,
filter names, call names, cell names): never a host, instance or request id.
"""

from __future__ import annotations

from typing import Protocol


class Recorder(Protocol):
    def rpc_call(self, method: str, outcome: str, seconds: float) -> None:
        """One RPC call answered anew (not from the reply cache): outcome ok/no_valid_host/error."""

    def phase(self, phase: str, seconds: float) -> None:
        """Time one select_destinations spent in candidates, decide, claim or reply."""

    def scheduled(self, instances: int) -> None:
        """Instances given a host by one successful select_destinations."""

    def no_valid_host(self, reason: str) -> None:
        """A NoValidHost, by the filter that emptied the list (or a fixed cause)."""

    def claim_replaced(self) -> None:
        """A refused claim's instance was decided again on another host."""

    def rollback(self, claims: int) -> None:
        """A failed request deleted the claims it had made."""

    def placement_call(self, call: str, status: str, seconds: float) -> None:
        """One Placement HTTP call: call name, status class (2xx, 4xx, 5xx, error)."""

    def refresh(self, cell: str, kind: str, seconds: float, ok: bool) -> None:
        """One host-state pass over one database (``cell`` = cell name or "api")."""


class NoRecorder:
    """Records nothing: the default of every layer, and what unit tests get."""

    def rpc_call(self, method: str, outcome: str, seconds: float) -> None:
        return None

    def phase(self, phase: str, seconds: float) -> None:
        return None

    def scheduled(self, instances: int) -> None:
        return None

    def no_valid_host(self, reason: str) -> None:
        return None

    def claim_replaced(self) -> None:
        return None

    def rollback(self, claims: int) -> None:
        return None

    def placement_call(self, call: str, status: str, seconds: float) -> None:
        return None

    def refresh(self, cell: str, kind: str, seconds: float, ok: bool) -> None:
        return None


NO_RECORDER: Recorder = NoRecorder()
