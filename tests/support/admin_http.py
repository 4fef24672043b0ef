"""Asking a daemon's admin endpoint: one GET with the bearer token, and polling ``/readyz``."""

from __future__ import annotations

import asyncio
import time

import aiohttp


async def admin_get(base: str, path: str, token: str | None) -> tuple[int, str]:
    """``GET base+path`` (``Authorization: Bearer token`` unless None): status and body."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        async with session.get(base + path, headers=headers) as resp:
            return resp.status, await resp.text()


async def wait_readyz(
    base: str, token: str | None, want: int, contains: str = "", within: float = 30.0
) -> str:
    """Poll /readyz until it answers ``want`` (and its body names ``contains``)."""
    deadline = time.monotonic() + within
    status, body = 0, ""
    while time.monotonic() < deadline:
        status, body = await admin_get(base, "/readyz", token)
        if status == want and contains in body:
            return body
        await asyncio.sleep(0.2)
    raise AssertionError(f"/readyz stayed {status}: {body!r} (wanted {want} {contains!r})")
