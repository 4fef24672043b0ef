"""Errors that cross package boundaries, named after the nova exceptions they stand for.

``NovaException`` subclasses travel to callers as oslo failures with ``module =
"nova.exception"`` and the class name, so an unmodified nova conductor re-raises them as its own
classes. Anything else is reported as a generic failure.

Every exception class defined anywhere in ``asyncsched`` roots at :class:`AsyncschedError`
(``tests/unit/test_structure.py`` walks the package to keep it so). Where one also means what a
standard exception means, it has that base too, as aiohttp's ``client_exceptions`` do: a bad
value is also a ``ValueError`` (``CodecError``, ``PciRequestFailed``, ``BadRequest``...), a
Placement timeout is also a ``TimeoutError``. A class that lives in one module stays there
(``rpc.wire.MalformedMessage``, ``placement.errors``...); only those crossing packages live here.
Three are private because they are control flow inside one module and never leave it:
``placement.client._Retry`` (a generation race, retried in the claim loop),
``rpc.server._NotStarted`` (a held call met the drain: requeued unanswered) and
``conf.loader._BadValue`` (re-raised as ``ConfigError`` with file, section and option).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar


class AsyncschedError(Exception):
    """Base of our own errors."""


class ConfigError(AsyncschedError):
    """An invalid configuration value; the message names file, section, option and value."""


class NovaException(AsyncschedError):
    """An error nova knows by name. ``msg_fmt`` and ``kwargs`` follow nova's exception class."""

    msg_fmt: ClassVar[str] = "An unknown exception occurred."
    code: ClassVar[int] = 500

    def __init__(self, message: str | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("code", self.code)
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                message = self.msg_fmt
        self.message = message
        super().__init__(message)


class NoValidHost(NovaException):
    msg_fmt = "No valid host was found. %(reason)s"

    def __init__(self, reason: str = "", **kwargs: Any) -> None:
        super().__init__(reason=reason, **kwargs)

    @property
    def reason(self) -> str:
        return str(self.kwargs.get("reason", ""))


class AllocationUpdateFailed(NovaException):
    msg_fmt = "Failed to update allocations for consumer %(consumer_uuid)s. Error: %(error)s"


class ConsumerHeld(AllocationUpdateFailed):
    """A new claim met a consumer that already holds allocations of the same project and
    user: a redelivered request whose first delivery's process claimed and died, or a move
    whose instance still holds its source allocation (evacuate). ``held`` is that allocation
    (provider uuid -> resources) and ``generation`` the consumer generation it was read at,
    for the caller to adopt, merge into a move's claim, or refuse."""

    def __init__(
        self,
        *,
        consumer_uuid: str,
        error: str,
        held: Mapping[str, Mapping[str, int]],
        generation: int | None = None,
    ) -> None:
        super().__init__(consumer_uuid=consumer_uuid, error=error)
        self.held = held
        self.generation = generation


class AllocationDeleteFailed(NovaException):
    msg_fmt = "Failed to delete allocations for consumer %(consumer_uuid)s. Error: %(error)s"


class PlacementError(AsyncschedError):
    """Placement unreachable, timed out, or answered something we cannot use."""


class DatabaseUnavailable(AsyncschedError):
    """A nova database cannot be reached; the cache keeps serving and is marked stale."""
