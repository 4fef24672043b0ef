"""The ``_context_*`` keys of an oslo.messaging message -> :class:`RequestContext`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from asyncsched.objects.models import (
    RequestContext,
)

_CONTEXT_PREFIX = "_context_"
_TIME_FORMATS = ("%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%SZ")


def _ctx_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    for fmt in _TIME_FORMATS:
        try:
            return datetime.strptime(value, fmt)
        except ValueError:
            continue
    return None


def decode_context(message: Mapping[str, Any]) -> RequestContext:
    """The ``_context_*`` keys of an inner message -> :class:`RequestContext`.

    Never fails: a context value of the wrong type is dropped (it only feeds logging and
    tenant-aware filters, and must not cost a request). Unknown keys are kept in ``raw``; the
    auth token is kept out of ``raw`` so it cannot end up in a log line.
    """
    ctx: dict[str, Any] = {
        key[len(_CONTEXT_PREFIX) :]: val
        for key, val in message.items()
        if isinstance(key, str) and key.startswith(_CONTEXT_PREFIX)
    }
    token = ctx.pop("auth_token", None)
    roles_raw = ctx.get("roles")
    roles = tuple(r for r in roles_raw if isinstance(r, str)) if isinstance(roles_raw, list) else ()
    read_deleted = ctx.get("read_deleted")
    return RequestContext(
        request_id=_ctx_str(ctx.get("request_id")),
        global_request_id=_ctx_str(ctx.get("global_request_id")),
        user_id=_ctx_str(ctx.get("user_id")) or _ctx_str(ctx.get("user")),
        project_id=_ctx_str(ctx.get("project_id"))
        or _ctx_str(ctx.get("project"))
        or _ctx_str(ctx.get("tenant")),
        user_name=_ctx_str(ctx.get("user_name")),
        project_name=_ctx_str(ctx.get("project_name")),
        roles=roles,
        is_admin=ctx.get("is_admin") is True,
        read_deleted=read_deleted if isinstance(read_deleted, str) else "no",
        timestamp=_parse_time(ctx.get("timestamp")),
        remote_address=_ctx_str(ctx.get("remote_address")),
        auth_token=_ctx_str(token),
        raw=ctx,
    )
