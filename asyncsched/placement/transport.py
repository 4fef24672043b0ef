"""One HTTP exchange with Placement, in named steps the client composes.

``Call`` is a request built once (URL, body, the headers that do not change between tries),
``send`` is one try on the pooled session, ``Answer`` is what came back (its JSON parsed on
demand), and ``RetryPolicy`` says whether a failed try is tried again and after how long. The
client (``client.PlacementClient._request``) adds the token, the one re-authentication after a
401, the metrics and the error mapping (``errors.transport_error`` and friends).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from yarl import URL

from asyncsched.common.backoff import Backoff
from asyncsched.placement.errors import PlacementConnectionError, PlacementDisconnected

#: methods a broken keep-alive socket may be retried on: nothing was changed twice
IDEMPOTENT = frozenset({"GET", "DELETE"})
#: waits before retrying a refused connection: 0.5 s, 1 s, then 2 s
CONNECT_BACKOFF = Backoff(initial=0.5, cap=2.0, jitter=0.0)


@dataclass(frozen=True, slots=True)
class Call:
    """One Placement request as built, before any try."""

    method: str
    path: str
    url: URL
    data: bytes | None
    version: str | None
    label: str  # the metrics' call name: ``op`` or the method

    @classmethod
    def build(
        cls,
        endpoint: str,
        method: str,
        path: str,
        *,
        version: str | None,
        query: str | None = None,
        body: Any = None,
        op: str | None = None,
    ) -> Call:
        raw = endpoint + path + (f"?{query}" if query else "")
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        return cls(method, path, URL(raw, encoded=True), data, version, op or method)

    @property
    def what(self) -> str:
        """``GET /path``, as errors quote the call."""
        return f"{self.method} {self.path}"

    def headers(self) -> dict[str, str]:
        """The headers of every try, before authentication adds its own."""
        headers = {"Accept": "application/json", "User-Agent": "asyncsched"}
        if self.version is not None:
            headers["OpenStack-API-Version"] = f"placement {self.version}"
        if self.data is not None:
            headers["Content-Type"] = "application/json"
        return headers


@dataclass(frozen=True, slots=True)
class Answer:
    """What Placement answered: the status, the raw body and its content type."""

    status: int
    payload: bytes
    ctype: str

    def json(self) -> Any:
        """The body parsed, or None when empty. Raises ValueError on a non-JSON body."""
        return json.loads(self.payload) if self.payload else None


async def send(
    session: aiohttp.ClientSession,
    call: Call,
    headers: dict[str, str],
    client_timeout: aiohttp.ClientTimeout,
) -> Answer:
    """One try. Raises aiohttp.ClientError or TimeoutError as aiohttp does."""
    async with session.request(
        call.method, call.url, data=call.data, headers=headers, timeout=client_timeout
    ) as resp:
        payload = await resp.read()
        return Answer(resp.status, payload, resp.headers.get("Content-Type", ""))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Which failed tries go again (``[placement] connect_retries``, as keystoneauth's)."""

    connect_retries: int = 0
    connect_backoff: Backoff = CONNECT_BACKOFF

    def wait(self, err: Exception, method: str, attempt: int) -> float | None:
        """Seconds to wait before trying again after ``attempt`` failed tries, or None.

        A refused connection is retried ``connect_retries`` times, backing off; a connection
        that broke after sending (a stale keep-alive socket of a restarted Placement) is
        retried at once, at least once, on an idempotent method only; a timeout never.
        """
        if isinstance(err, PlacementDisconnected):
            retry = method in IDEMPOTENT and attempt < max(1, self.connect_retries)
            return 0.0 if retry else None
        if isinstance(err, PlacementConnectionError) and attempt < self.connect_retries:
            return self.connect_backoff.base(attempt)
        return None
