"""The admin HTTP endpoint: probes, status, Prometheus metrics, and routes others mount.

It is a component like the others and comes FIRST in the start order: ``/healthz`` answers
while the host state is still loading (a liveness probe must not kill a slow start), and
``/readyz`` says 503 "service is starting" until every component is up and READY=1 was sent.
Being first it is also closed last, so probes keep answering (``/readyz`` 503 "stopping")
while the consumers drain.

Handlers only read snapshots and counters; nothing here waits on scheduling and scheduling
never waits on a client: aiohttp serves each connection in its own task, and a slow reader
only holds its own socket.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from asyncsched.admin.readiness import ReadyLimits, not_ready_reasons
from asyncsched.common.health import ServiceHealth, Snapshot
from asyncsched.conf.listen import ListenAddress
from asyncsched.conf.redact import mask_secrets, mask_tree
from asyncsched.exceptions import ConfigError

LOG = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz"})  # answered without a token: liveness probes carry none
PROBE_CACHE_S = 1.0  # one Placement probe serves every /readyz within this many seconds
SHUTDOWN_TIMEOUT = 2.0  # an admin client still connected at close gets this long
MAX_HEADER_BYTES = 65536  # a longer header line is refused by aiohttp's parser (400)

HealthSource = Callable[[], ServiceHealth]
PlacementProbe = Callable[[], Awaitable[None]]


def is_loopback(host: str) -> bool:
    """``127.0.0.1``, ``::1``, ``localhost``: reachable from this machine only. An empty host
    (``admin_listen = :9105``) is every address, not loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def check_exposure(listen: ListenAddress, token: str | None, tls: bool) -> str | None:
    """Refuse an endpoint reachable from other machines without a token (ConfigError); the
    warning to log for one that is open or sends its token in clear, else None."""
    where = f"[asyncsched] admin_listen {listen.host or '(every address)'}:{listen.port}"
    if is_loopback(listen.host):
        if token is None:
            return (
                f"{where}: the admin endpoint is open to every local user (no admin_token_file):"
                " explain, capacity, status and metrics answer anyone on this machine"
            )
        return None
    if token is None:
        raise ConfigError(
            f"{where} is not a loopback address: set [asyncsched] admin_token_file (and "
            "admin_cert_file/admin_key_file for TLS), or listen on 127.0.0.1"
        )
    if not tls:
        return f"{where}: the bearer token crosses the network in clear (no admin_cert_file)"
    return None


def tls_context(cert_file: str | None, key_file: str | None) -> ssl.SSLContext | None:
    """A server TLS context from ``admin_cert_file`` / ``admin_key_file`` (both or none)."""
    if not cert_file and not key_file:
        return None
    if not cert_file or not key_file:
        raise ConfigError("[asyncsched] admin_cert_file and admin_key_file go together")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"[asyncsched] admin_cert_file/admin_key_file: {exc}") from exc
    return context


def token_matches(header: str, token: bytes) -> bool:
    """``Authorization: Bearer <token>``, compared in constant time (digests of equal length).
    Any header at all, even one that is not UTF-8 text, is a yes or a no, never an error."""
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    raw = given.strip().encode("utf-8", "surrogateescape")
    return hmac.compare_digest(hashlib.sha256(raw).digest(), hashlib.sha256(token).digest())


def read_token(path: str | None) -> str | None:
    """The bearer token from ``admin_token_file`` (stripped); an empty file is an error."""
    if not path:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigError(f"[asyncsched] admin_token_file {path}: {exc}") from exc
    if not token:
        raise ConfigError(f"[asyncsched] admin_token_file {path} is empty")
    return token


@dataclass(frozen=True, slots=True)
class AdminHealth(Snapshot):
    """``AdminServer.health()``: where it listens, how it guards, requests and refusals."""

    listen: str
    serving: bool
    token_required: bool
    tls: bool
    requests: int
    denied: int  # refused for a missing or wrong token


class AdminServer:
    """aiohttp server for ``/healthz``, ``/readyz``, ``/v1/status``, ``/metrics`` + extras.

    ``health`` returns the service snapshot (``Service.health()``); ``placement_probe``
    raises when Placement does not answer; ``extra_routes`` (e.g. ``POST /v1/explain``) are
    mounted behind the same token check.
    """

    name = "admin"

    def __init__(
        self,
        listen: ListenAddress,
        *,
        health: HealthSource,
        limits: ReadyLimits,
        registry: CollectorRegistry,
        token: str | None = None,
        placement_probe: PlacementProbe | None = None,
        placement_timeout: float = 2.0,
        extra_routes: Sequence[web.RouteDef] = (),
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self._warning = check_exposure(listen, token, tls is not None)
        self._tls = tls
        self._listen = listen
        self._health = health
        self._limits = limits
        self._registry = registry
        self._token = token
        self._token_bytes = token.encode("utf-8") if token is not None else b""
        self._probe = placement_probe
        self._probe_timeout = placement_timeout
        self._probe_result: tuple[float, str | None] | None = None
        self._probe_flight: asyncio.Future[str | None] | None = None
        self._extra = tuple(extra_routes)
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._requests = 0
        self._denied = 0

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        app = web.Application(middlewares=[self._auth])
        app.add_routes(
            [
                web.get("/healthz", self._healthz),
                web.get("/readyz", self._readyz),
                web.get("/v1/status", self._status),
                web.get("/metrics", self._metrics),
                *self._extra,
            ]
        )
        runner = web.AppRunner(
            app,
            access_log=None,
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            handler_cancellation=True,  # a client gone away cancels its handler's work
            max_field_size=MAX_HEADER_BYTES,
        )
        await runner.setup()
        site = web.TCPSite(runner, self._listen.host, self._listen.port, ssl_context=self._tls)
        try:
            await site.start()
        except OSError as exc:
            await runner.cleanup()
            raise ConfigError(
                f"[asyncsched] admin_listen {self._listen.host}:{self._listen.port}: {exc}"
            ) from exc
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or ()
        self._port = sockets[0].getsockname()[1] if sockets else self._listen.port
        LOG.info(
            "admin endpoint on %s://%s:%s (token %s)",
            "https" if self._tls else "http",
            self._listen.host,
            self._port,
            "required" if self._token else "not required",
        )
        if self._warning:
            LOG.warning("%s", self._warning)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def health(self) -> AdminHealth:
        return AdminHealth(
            listen=f"{self._listen.host}:{self._port or self._listen.port}",
            serving=self._runner is not None,
            token_required=self._token is not None,
            tls=self._tls is not None,
            requests=self._requests,
            denied=self._denied,
        )

    @property
    def port(self) -> int | None:
        """The bound port (differs from the configured one when that was 0)."""
        return self._port

    # ---------------------------------------------------------------- handlers

    @web.middleware
    async def _auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        self._requests += 1
        if self._token is not None and request.path not in OPEN_PATHS:
            given = request.headers.getall("Authorization", [])
            if len(given) != 1 or not token_matches(given[0], self._token_bytes):
                self._denied += 1
                return web.Response(
                    status=401,
                    text="a bearer token is required\n",
                    headers={"WWW-Authenticate": 'Bearer realm="asyncsched"'},
                )
        return await handler(request)

    async def _healthz(self, request: web.Request) -> web.Response:
        """Answered from the event loop itself: a blocked loop fails the probe."""
        return web.Response(text="ok\n")

    async def _readyz(self, request: web.Request) -> web.Response:
        _, reasons = await self._verdict()
        if reasons:
            return web.Response(status=503, text="".join(f"{mask_secrets(r)}\n" for r in reasons))
        return web.Response(text="ready\n")

    async def _status(self, request: web.Request) -> web.Response:
        snapshot, reasons = await self._verdict()
        doc = mask_tree({**snapshot.as_json(), "ready": not reasons, "not_ready": reasons})
        return web.Response(
            text=json.dumps(doc, default=str, sort_keys=True), content_type="application/json"
        )

    async def _verdict(self) -> tuple[ServiceHealth, list[str]]:
        """The snapshot and why it is not ready. Placement is only probed while running:
        before start() the client has no session, and the state already says why."""
        snapshot = self._health()
        running = snapshot.state == "running"
        placement_error = await self._placement_error() if running else None
        return snapshot, not_ready_reasons(snapshot, self._limits, placement_error)

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    # ---------------------------------------------------------------- Placement probe

    async def _placement_error(self) -> str | None:
        """The latest probe's error (None = reachable); one probe in flight, cached briefly."""
        if self._probe is None:
            return None
        now = time.monotonic()
        if self._probe_result is not None and now - self._probe_result[0] < PROBE_CACHE_S:
            return self._probe_result[1]
        if self._probe_flight is None:
            self._probe_flight = asyncio.ensure_future(self._run_probe())
        return await asyncio.shield(self._probe_flight)

    async def _run_probe(self) -> str | None:
        assert self._probe is not None
        try:
            async with asyncio.timeout(self._probe_timeout):
                await self._probe()
            error = None
        except TimeoutError:
            error = f"no answer within {self._probe_timeout:g} s"
        except Exception as exc:  # any failure is the answer, never the probe's crash
            error = str(exc) or type(exc).__name__
        finally:
            self._probe_flight = None
        self._probe_result = (time.monotonic(), error)
        return error
