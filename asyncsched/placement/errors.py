"""Placement failures: one hierarchy, and the one place an HTTP answer becomes an error.

The root, :class:`~asyncsched.exceptions.PlacementError`, lives in ``asyncsched.exceptions``
because callers outside this package (the scheduler, the service shell, auth) catch it; every
error raised here is one of its subclasses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp

from asyncsched.exceptions import PlacementError

__all__ = [
    "PlacementConnectionError",
    "PlacementDisconnected",
    "PlacementError",
    "PlacementHTTPError",
    "PlacementTimeout",
    "error_code",
    "error_detail",
    "fails_any_call",
    "non_json_error",
    "status_error",
    "transport_error",
]


class PlacementConnectionError(PlacementError):
    """The request never reached Placement (refused, DNS, reset before sending)."""


class PlacementDisconnected(PlacementConnectionError):
    """The connection broke after the request was sent: a write may have been applied."""


class PlacementTimeout(PlacementError, TimeoutError):
    """No answer in time; a write may or may not have been applied."""


class PlacementHTTPError(PlacementError):
    """Placement answered with a status the call cannot use."""

    def __init__(self, message: str, status: int, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code

    @classmethod
    def answered(cls, what: str, status: int, body: Any) -> PlacementHTTPError:
        """``<what>: HTTP <status> <Placement's detail>``, keeping Placement's error code."""
        return cls(f"{what}: HTTP {status} {error_detail(body)}", status, error_code(body))


def fails_any_call(status: int) -> bool:
    """A status no call handles itself: server errors and refused credentials (after the one
    re-authentication). Everything else (204, 404, 409, ...) is the calling method's to judge."""
    return status >= 500 or status in (401, 403)


def transport_error(
    exc: aiohttp.ClientError | TimeoutError, endpoint: str, what: str, timeout_s: float
) -> PlacementError:
    """What a failed send means: never reached Placement, no answer in time, or the
    connection broke after sending (in that order: aiohttp's connect timeouts are both)."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return PlacementConnectionError(f"Placement unreachable at {endpoint} ({what}): {exc}")
    if isinstance(exc, TimeoutError):
        return PlacementTimeout(
            f"Placement at {endpoint} did not answer {what} within {timeout_s:g} s"
        )
    return PlacementDisconnected(
        f"Placement connection failed at {endpoint} ({what}): {type(exc).__name__}: {exc}"
    )


def status_error(endpoint: str, what: str, status: int, payload: bytes) -> PlacementHTTPError:
    """A status that fails any call (``fails_any_call``), quoting the body's first 300 bytes."""
    text = payload[:300].decode("utf-8", "replace")
    return PlacementHTTPError(
        f"Placement at {endpoint} answered {what} with HTTP {status}: {text}", status
    )


def non_json_error(endpoint: str, what: str, status: int, ctype: str) -> PlacementError:
    """An answer whose body does not parse as JSON."""
    return PlacementError(
        f"Placement at {endpoint} answered {what} with HTTP {status} and a "
        f"non-JSON body ({ctype or 'no content type'})"
    )


def _first_error(body: Any) -> Mapping[str, Any]:
    if isinstance(body, dict):
        errors = body.get("errors")
        if isinstance(errors, list) and errors and isinstance(errors[0], dict):
            return errors[0]
    return {}


def error_code(body: Any) -> str | None:
    """Placement's machine-readable error code (``placement.concurrent_update``), if any."""
    code = _first_error(body).get("code")
    return code if isinstance(code, str) else None


def error_detail(body: Any) -> str:
    """Placement's human-readable error detail, or ``""``."""
    detail = _first_error(body).get("detail")
    return detail if isinstance(detail, str) else ""
