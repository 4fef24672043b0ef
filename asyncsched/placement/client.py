"""Async Placement client: one pooled aiohttp session for candidates, claims and rollback.

Behaviour mirrors nova's SchedulerReportClient (``get_allocation_candidates``,
``claim_resources`` with its ``@retries``, ``delete_allocation_for_instance``) but every call is
a coroutine on a shared keep-alive pool, responses are parsed in one pass, and a failure is
always a typed error carrying the real cause instead of a silent ``None``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp
from yarl import URL

from asyncsched.common.lifecycle import StartClose
from asyncsched.common.recorder import NO_RECORDER, Recorder
from asyncsched.conf.options import Config, PlacementOptions
from asyncsched.conf.redact import mask_url_passwords
from asyncsched.exceptions import (
    AllocationDeleteFailed,
    AllocationUpdateFailed,
    AsyncschedError,
    ConsumerHeld,
)
from asyncsched.placement.auth import Auth, make_auth
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.coalesce import ClaimCoalescer
from asyncsched.placement.errors import (
    PlacementConnectionError,
    PlacementDisconnected,
    PlacementError,
    PlacementHTTPError,
    PlacementTimeout,
    error_code,
    error_detail,
    fails_any_call,
)
from asyncsched.placement.health import PlacementHealth
from asyncsched.placement.microversions import (
    CANDIDATES_VERSION,
    CONSUMER_GENERATION_VERSION,
    CONSUMER_TYPE_VERSION,
    at_least,
    version_tuple,
)
from asyncsched.placement.overcommit import OvercommitGuard
from asyncsched.placement.pending import Claimed, Journal, PendingRollbacks
from asyncsched.placement.query import ResourceRequest
from asyncsched.placement.usage import ProviderUsage, capacities

LOG = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
CLAIM_ATTEMPTS = 4  # nova's @retries
DELETE_ATTEMPTS = 4
CAPACITY_TTL = 60.0  # seconds a provider's capacity is reused by the overcommit guard
RECENT_CLAIMS = 4096  # our recent writes, so a rollback undoes only those (fenced)
#: a new consumer's first write leaves it at this generation (Placement creates it at 0 and
#: increments it with the write; tests/integration/placement/test_fencing_real.py checks it)
NEW_CONSUMER_GENERATION = 1


class _Retry(AsyncschedError):
    """A resource-provider generation race: nova retries the claim locally."""


@dataclass(slots=True)
class _Stats:
    calls: int = 0
    errors: int = 0
    claims: int = 0
    claim_conflicts: int = 0
    claims_failed: int = 0
    deletes: int = 0
    delete_failures: int = 0
    fenced: int = 0  # undos Placement refused on the consumer generation (not ours any more)
    last_error: str | None = None
    last_error_at: float | None = None
    last_ok_at: float | None = None
    durations: dict[str, float] = field(default_factory=dict)


class PlacementClient(StartClose):
    """Long-lived Placement client. Use ``async with`` or start()/close()."""

    def __init__(
        self,
        options: PlacementOptions,
        *,
        session: aiohttp.ClientSession | None = None,
        noauth_token: str | None = "admin",
        pool_size: int = 64,
        claim_backoff: float = 2.0,
        rng: random.Random | None = None,
        recorder: Recorder = NO_RECORDER,
        overcommit_guard: bool = False,
        claim_batch_size: int = 1,
        claim_writes_in_flight: int = 4,
    ) -> None:
        self._recorder = recorder
        self._options = options
        self._timeout_s = options.timeout if options.timeout else DEFAULT_TIMEOUT
        self._timeout = aiohttp.ClientTimeout(total=self._timeout_s)
        self._session = session
        self._own_session = session is None
        self._pool_size = pool_size
        self._auth: Auth = make_auth(options, noauth_token=noauth_token, timeout=self._timeout_s)
        self._endpoint: str | None = None
        self._connect_retries = options.connect_retries or 0
        self.max_version: str | None = None
        self._rng = rng or random.Random()
        self._claim_backoff = claim_backoff  # nova sleeps uniform(0, 2 * attempt) between tries
        self._stats = _Stats()
        # One claim at a time per provider from this process: the real Placement (16.0.0 on
        # PostgreSQL) accepts two concurrent PUT /allocations on one provider even when only
        # one fits (both 204, usage over capacity), so its generation check cannot be relied
        # on for claims we overlap ourselves. Locks vanish when no claim holds them.
        self._provider_locks: weakref.WeakValueDictionary[str, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        # ... and across processes the guard confirms each new claim within capacity after
        # the fact, reading usage from Placement (or, once set, another UsageSource).
        self.guard: OvercommitGuard | None = (
            OvercommitGuard(self, self.delete_allocation, rng=self._rng)
            if overcommit_guard
            else None
        )
        # Deletions Placement could not take: kept and retried (the daemon sets this; a bare
        # client raises AllocationDeleteFailed instead).
        self.pending: PendingRollbacks | None = None
        self._recent: OrderedDict[str, Claimed] = OrderedDict()
        self._capacity: dict[str, tuple[float, dict[str, int]]] = {}  # rp -> (expiry, capacity)
        # New consumers' claims that arrive together share one POST /allocations (1 = off).
        self._coalescer: ClaimCoalescer | None = (
            ClaimCoalescer(
                self._write, max_batch=claim_batch_size, in_flight=claim_writes_in_flight
            )
            if claim_batch_size > 1
            else None
        )

    @classmethod
    def from_config(
        cls,
        config: Config,
        *,
        session: aiohttp.ClientSession | None = None,
        recorder: Recorder = NO_RECORDER,
    ) -> PlacementClient:
        """The service's client: ``[placement]`` plus ``[asyncsched] placement_noauth_token``."""
        client = cls(
            config.placement,
            session=session,
            noauth_token=config.asyncsched.placement_noauth_token,
            recorder=recorder,
            overcommit_guard=config.asyncsched.overcommit_guard,
            claim_batch_size=config.asyncsched.claim_batch_size,
            claim_writes_in_flight=config.asyncsched.claim_writes_in_flight,
        )
        client.pending = PendingRollbacks(client, Journal.in_dir(config.asyncsched.state_dir))
        return client

    # ---- lifecycle ----

    async def start(self) -> None:
        """Open the pool, authenticate, find the endpoint and negotiate the microversion."""
        if self._session is None:
            connector = aiohttp.TCPConnector(
                limit=self._pool_size, ttl_dns_cache=300, ssl=self._ssl()
            )
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
            self._own_session = True
        endpoint = await self._auth.endpoint()
        if not endpoint:
            raise PlacementError(
                f"No {self._options.service_type} endpoint found (catalog interfaces "
                f"{list(self._options.valid_interfaces)}, region {self._options.region_name!r})"
            )
        self._endpoint = endpoint.rstrip("/")
        status, body = await self._request("GET", "/", version=None, op="version")
        if status != 200 or not isinstance(body, dict):
            raise PlacementHTTPError.answered(
                f"Placement at {self.endpoint} refused GET /", status, body
            )
        versions = body.get("versions") or []
        max_version = max(
            (v.get("max_version") or "1.0" for v in versions if isinstance(v, dict)),
            key=version_tuple,
            default="1.0",
        )
        if not at_least(max_version, CANDIDATES_VERSION):
            raise PlacementError(
                f"Placement at {self.endpoint} supports microversions up to {max_version}; "
                f"asyncsched needs {CANDIDATES_VERSION}"
            )
        self.max_version = max_version
        LOG.info("placement: %s, max microversion %s", self.endpoint, max_version)

    async def ping(self) -> None:
        """GET / answered: Placement is reachable now (readiness). Raises PlacementError."""
        status, body = await self._request("GET", "/", version=None, op="ping")
        if status != 200:
            raise PlacementHTTPError.answered(
                f"Placement at {self.endpoint} refused GET /", status, body
            )

    def _ssl(self) -> Any:
        o = self._options
        if o.insecure:
            return False
        if o.cafile or o.certfile:
            import ssl

            ctx = ssl.create_default_context(cafile=o.cafile)
            if o.certfile:
                ctx.load_cert_chain(o.certfile, o.keyfile)
            return ctx
        return None

    async def close(self) -> None:
        if self._coalescer is not None:
            await self._coalescer.close()
        if self._session is not None and self._own_session:
            await self._session.close()
        self._session = None if self._own_session else self._session

    @property
    def endpoint(self) -> str:
        o = self._options
        configured = o.endpoint_override or dict(o.plugin_options).get("endpoint")
        return mask_url_passwords(self._endpoint or configured or "?")

    def supports(self, version: str) -> bool:
        return self.max_version is not None and at_least(self.max_version, version)

    def health(self) -> PlacementHealth:
        s = self._stats
        now = time.monotonic()
        return PlacementHealth(
            endpoint=self.endpoint,
            started=self.max_version is not None and self._session is not None,
            max_version=self.max_version,
            calls=s.calls,
            errors=s.errors,
            claims=s.claims,
            claim_conflicts=s.claim_conflicts,
            claims_failed=s.claims_failed,
            deletes=s.deletes,
            delete_failures=s.delete_failures,
            fenced=s.fenced,
            last_error=s.last_error,
            last_error_age_s=None if s.last_error_at is None else round(now - s.last_error_at, 3),
            last_ok_age_s=None if s.last_ok_at is None else round(now - s.last_ok_at, 3),
            last_duration_ms={k: round(v * 1000, 2) for k, v in s.durations.items()},
            claim_batches=None if self._coalescer is None else asdict(self._coalescer.stats),
            overcommit_guard=None if self.guard is None else self.guard.health(),
            pending_rollbacks=None if self.pending is None else self.pending.health(),
        )

    # ---- transport ----

    async def _write(
        self, method: str, path: str, body: Any, version: str, op: str
    ) -> tuple[int, Any]:
        """A claim write for the coalescer (its ``Write``)."""
        return await self._request(method, path, version=version, body=body, op=op)

    def _fail(self, err: PlacementError) -> PlacementError:
        self._stats.errors += 1
        self._stats.last_error = str(err)
        self._stats.last_error_at = time.monotonic()
        return err

    async def _request(
        self,
        method: str,
        path: str,
        *,
        version: str | None,
        query: str | None = None,
        body: Any = None,
        op: str | None = None,
    ) -> tuple[int, Any]:
        """One HTTP call: (status, parsed JSON or None). Raises PlacementError subclasses."""
        session = self._session
        if session is None or self._endpoint is None:
            raise PlacementError("PlacementClient used before start()")
        raw = self._endpoint + path + (f"?{query}" if query else "")
        url = URL(raw, encoded=True)
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        what = f"{method} {path}"
        attempt = 0
        reauthed = False
        self._stats.calls += 1
        t0 = time.perf_counter()
        while True:
            headers = {"Accept": "application/json", "User-Agent": "asyncsched"}
            if version is not None:
                headers["OpenStack-API-Version"] = f"placement {version}"
            if data is not None:
                headers["Content-Type"] = "application/json"
            try:
                headers.update(await self._auth.headers())
            except PlacementError as exc:
                raise self._fail(exc) from None
            try:
                async with session.request(
                    method, url, data=data, headers=headers, timeout=self._timeout
                ) as resp:
                    status = resp.status
                    payload = await resp.read()
                    ctype = resp.headers.get("Content-Type", "")
            except aiohttp.ClientConnectorError as exc:
                if attempt < self._connect_retries:
                    attempt += 1
                    await asyncio.sleep(min(0.5 * attempt, 2.0))
                    continue
                self._recorder.placement_call(op or method, "error", time.perf_counter() - t0)
                raise self._fail(
                    PlacementConnectionError(
                        f"Placement unreachable at {self.endpoint} ({what}): {exc}"
                    )
                ) from exc
            except TimeoutError as exc:
                self._recorder.placement_call(op or method, "error", time.perf_counter() - t0)
                raise self._fail(
                    PlacementTimeout(
                        f"Placement at {self.endpoint} did not answer {what} within "
                        f"{self._timeout_s:g} s"
                    )
                ) from exc
            except aiohttp.ClientError as exc:
                if method in ("GET", "DELETE") and attempt < max(1, self._connect_retries):
                    # A stale keep-alive socket (Placement restarted): idempotent, so retry.
                    attempt += 1
                    continue
                self._recorder.placement_call(op or method, "error", time.perf_counter() - t0)
                raise self._fail(
                    PlacementDisconnected(
                        f"Placement connection failed at {self.endpoint} ({what}): "
                        f"{type(exc).__name__}: {exc}"
                    )
                ) from exc
            if status == 401 and not reauthed:
                reauthed = True
                self._auth.invalidate()
                continue
            break
        elapsed = self._stats.durations[op or method] = time.perf_counter() - t0
        self._recorder.placement_call(op or method, f"{status // 100}xx", elapsed)
        if fails_any_call(status):
            text = payload[:300].decode("utf-8", "replace")
            raise self._fail(
                PlacementHTTPError(
                    f"Placement at {self.endpoint} answered {what} with HTTP {status}: {text}",
                    status,
                )
            )
        parsed: Any = None
        if payload:
            try:
                parsed = json.loads(payload)
            except ValueError as exc:
                raise self._fail(
                    PlacementError(
                        f"Placement at {self.endpoint} answered {what} with HTTP {status} and a "
                        f"non-JSON body ({ctype or 'no content type'})"
                    )
                ) from exc
        self._stats.last_ok_at = time.monotonic()
        return status, parsed

    # ---- candidates ----

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        """GET /allocation_candidates at 1.36; an empty answer is an empty Candidates."""
        qs = request.to_querystring()
        status, body = await self._request(
            "GET",
            "/allocation_candidates",
            version=CANDIDATES_VERSION,
            query=qs,
            op="allocation_candidates",
        )
        if status != 200 or not isinstance(body, dict):
            raise self._fail(
                PlacementHTTPError.answered(
                    f"Placement refused GET /allocation_candidates?{qs}", status, body
                )
            )
        return Candidates.parse(body, CANDIDATES_VERSION)

    # ---- allocations ----

    async def get_allocations(self, consumer_uuid: str) -> dict[str, Any]:
        """GET /allocations/{consumer} at 1.28: allocations and consumer_generation."""
        status, body = await self._request(
            "GET",
            f"/allocations/{consumer_uuid}",
            version=CONSUMER_GENERATION_VERSION,
            op="get_allocations",
        )
        if status != 200 or not isinstance(body, dict):
            raise self._fail(
                PlacementHTTPError.answered(f"GET /allocations/{consumer_uuid}", status, body)
            )
        return body

    async def claim(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        allocation_request_version: str = CANDIDATES_VERSION,
        may_have_allocations: bool = False,
        consumer_type: str = "INSTANCE",
    ) -> bool:
        """nova's claim_resources: True once Placement answered 204.

        Provider-generation races are retried (4 attempts, sleep uniform(0, 2*attempt));
        a consumer-generation conflict raises AllocationUpdateFailed; anything else is False
        with the cause logged. With the overcommit guard, a new claim that a concurrent one
        elsewhere pushed over capacity is backed out and reported False.
        """
        self._stats.claims += 1
        providers = sorted((allocation_request.get("allocations") or {}).keys())
        async with contextlib.AsyncExitStack() as held:
            for rp in providers:  # sorted: two multi-provider claims never deadlock
                lock = self._provider_locks.get(rp)
                if lock is None:
                    lock = self._provider_locks[rp] = asyncio.Lock()
                await held.enter_async_context(lock)
            done = await self._claim_with_retries(
                consumer_uuid,
                allocation_request,
                project_id=project_id,
                user_id=user_id,
                allocation_request_version=allocation_request_version,
                may_have_allocations=may_have_allocations,
                consumer_type=consumer_type,
            )
        if done is None:
            self._stats.claims_failed += 1
            return False
        return await self._claimed(consumer_uuid, allocation_request, done)

    async def _claimed(
        self, consumer_uuid: str, allocation_request: Mapping[str, Any], done: Claimed
    ) -> bool:
        """Note a write Placement took; with the guard, confirm it within capacity (backing
        it out undoes only our write: a move's source allocation is put back)."""
        if self.pending is not None and consumer_uuid in self.pending:
            await self.pending.discard(consumer_uuid)  # wanted again: not to be deleted
        self._remember(consumer_uuid, done)
        if self.guard is not None:
            confirmed = await self.guard.confirm(consumer_uuid, allocation_request)
            if not confirmed:
                self._stats.claims_failed += 1
            return confirmed
        return True

    def _remember(self, consumer_uuid: str, claimed: Claimed) -> None:
        self._recent[consumer_uuid] = claimed
        self._recent.move_to_end(consumer_uuid)
        if len(self._recent) > RECENT_CLAIMS:
            self._recent.popitem(last=False)

    async def take_over(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        generation: int,
        project_id: str,
        user_id: str,
        before: Mapping[str, Mapping[str, int]] | None = None,
    ) -> bool:
        """Make an allocation another process wrote ours (a redelivered call adopting its
        first delivery's claim): PUT it again at the consumer generation it was read at. The
        generation moves on, so the first process's undo is refused (fencing), and ours
        undoes it like any claim of the call (putting ``before`` back: what the consumer held
        besides that claim, a move's source). False when Placement refuses (the consumer
        changed since it was read: the caller decides the instance again)."""
        before = before or {}
        mine = _resources(allocation_request["allocations"])
        status, body = await self._put_at(
            consumer_uuid, {**mine, **before}, generation, (project_id, user_id), op="claim"
        )
        if status != 204:
            LOG.warning(
                "placement: taking over %s refused (HTTP %s %s): it changed since it was read",
                consumer_uuid,
                status,
                " ".join(error_detail(body).split()),
            )
            return False
        LOG.info("placement: took over the allocations of %s", consumer_uuid)
        done = Claimed(mine, generation + 1, before, project_id, user_id)
        return await self._claimed(consumer_uuid, allocation_request, done)

    async def _claim_with_retries(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        allocation_request_version: str,
        may_have_allocations: bool,
        consumer_type: str,
    ) -> Claimed | None:
        """Our write (None: refused), as nova's @retries claim_resources makes it."""
        for attempt in range(CLAIM_ATTEMPTS):
            delay = self._rng.uniform(0, attempt * self._claim_backoff)
            if delay:
                await asyncio.sleep(delay)
            try:
                return await self._claim_once(
                    consumer_uuid,
                    allocation_request,
                    project_id=project_id,
                    user_id=user_id,
                    version=allocation_request_version,
                    may_have_allocations=may_have_allocations,
                    consumer_type=consumer_type,
                )
            except _Retry:
                self._stats.claim_conflicts += 1
                LOG.debug(
                    "placement: provider generation race claiming %s (attempt %d); retrying",
                    consumer_uuid,
                    attempt + 1,
                )
            except (PlacementTimeout, PlacementDisconnected) as exc:
                # The PUT may have been applied: remove it rather than leak it.
                LOG.error("placement: claim for %s timed out (%s); removing it", consumer_uuid, exc)
                # generation unknown: undone only while the consumer holds exactly this (a
                # move's doubled-up claim is then left alone, its source never deleted)
                mine = Claimed(_resources(allocation_request.get("allocations") or {}))
                self._remember(consumer_uuid, mine)
                try:
                    await self.delete_allocation(consumer_uuid)
                except (AllocationDeleteFailed, PlacementError):
                    pass  # logged loudly by delete_allocation
                return None
            except PlacementError as exc:
                LOG.error("placement: claim for %s failed: %s", consumer_uuid, exc)
                return None
        LOG.error("placement: claim for %s failed: out of retries", consumer_uuid)
        return None

    async def _claim_once(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        version: str,
        may_have_allocations: bool,
        consumer_type: str,
    ) -> Claimed | None:
        payload: dict[str, Any] = dict(allocation_request)  # shallow: shared request untouched
        consumer_generation: int | None = None
        current_allocs: Mapping[str, Any] = {}
        if may_have_allocations:
            current = await self.get_allocations(consumer_uuid)
            current_allocs = current.get("allocations") or {}
            if current_allocs:
                if "consumer_generation" in allocation_request:
                    consumer_generation = allocation_request["consumer_generation"]
                else:
                    consumer_generation = current.get("consumer_generation")
                payload = _doubled_up(current_allocs, allocation_request)
        payload["project_id"] = project_id
        payload["user_id"] = user_id
        if at_least(version, CONSUMER_GENERATION_VERSION):
            payload["consumer_generation"] = consumer_generation
        if at_least(version, CONSUMER_TYPE_VERSION):
            payload["consumer_type"] = consumer_type
        if self._coalescer is not None and consumer_generation is None:  # a new consumer
            status, body = await self._coalescer.put(consumer_uuid, payload, version)
        else:
            status, body = await self._request(
                "PUT", f"/allocations/{consumer_uuid}", version=version, body=payload, op="claim"
            )
        if status == 204:
            after = (
                NEW_CONSUMER_GENERATION if consumer_generation is None else consumer_generation + 1
            )
            before = _resources(current_allocs) if consumer_generation is not None else {}
            mine = _resources(allocation_request.get("allocations") or {})
            return Claimed(mine, after, before, project_id, user_id)
        code, detail = error_code(body), error_detail(body)
        if code == "placement.concurrent_update":
            if "consumer generation conflict" in detail:
                if consumer_generation is None:
                    return await self._held_already(consumer_uuid, payload)  # or raises
                raise AllocationUpdateFailed(
                    consumer_uuid=consumer_uuid,
                    error=f"another process changed the consumer {consumer_uuid} during the claim",
                )
            raise _Retry(detail)
        LOG.warning(
            "placement: claim for %s refused: HTTP %s %s %s",
            consumer_uuid,
            status,
            code,
            " ".join(detail.split()),
        )
        return None

    async def _held_already(self, consumer_uuid: str, payload: Mapping[str, Any]) -> Claimed:
        """A new claim met a consumer that holds allocations. After a resent PUT (aiohttp
        retries a PUT on a dropped keep-alive socket) it is our own first write: exactly our
        allocation, so return. Another allocation of the same project and user is a
        redelivered request's first claim (its process died unacked) or a move's source (an
        evacuated instance holds its allocation on the dead host): ConsumerHeld carries it for
        the caller to adopt or to claim again as a move. Anything else is another process's
        consumer."""
        changed = f"another process changed the consumer {consumer_uuid} during the claim"
        try:
            current = await self.get_allocations(consumer_uuid)
        except PlacementError:
            raise AllocationUpdateFailed(consumer_uuid=consumer_uuid, error=changed) from None
        held = {
            rp: dict(a.get("resources") or {})
            for rp, a in (current.get("allocations") or {}).items()
        }
        wanted = {rp: dict(a["resources"]) for rp, a in payload["allocations"].items()}
        same_owner = current.get("project_id") == payload.get("project_id") and current.get(
            "user_id"
        ) == payload.get("user_id")
        if same_owner and held == wanted:
            LOG.info("placement: claim for %s was already applied (resent request)", consumer_uuid)
            gen = current.get("consumer_generation")
            return Claimed(held, gen, {}, payload.get("project_id"), payload.get("user_id"))
        if same_owner and held:
            LOG.info("placement: %s already holds allocations on %s", consumer_uuid, sorted(held))
            raise ConsumerHeld(
                consumer_uuid=consumer_uuid,
                error=changed,
                held=held,
                generation=current.get("consumer_generation"),
            )
        raise AllocationUpdateFailed(consumer_uuid=consumer_uuid, error=changed)

    async def provider_usage(self, provider_uuid: str) -> ProviderUsage:
        """Capacity and usage of one provider (the guard's UsageSource).

        Usage is read every time; capacity (inventories change rarely) is kept for
        CAPACITY_TTL seconds, and read again whenever the provider looks over capacity, so
        a claim is never backed out on a stale capacity.
        """
        base = f"/resource_providers/{provider_uuid}"
        cached = self._capacity.get(provider_uuid)
        fresh = cached is None or cached[0] < time.monotonic()
        if fresh:
            inv_call = self._json_get(base + "/inventories", "inventories")
            use_call = self._json_get(base + "/usages", "usages")
            inv, use = await asyncio.gather(inv_call, use_call)
            capacity = capacities(inv.get("inventories") or {})
            self._capacity[provider_uuid] = (time.monotonic() + CAPACITY_TTL, capacity)
        else:
            assert cached is not None
            capacity = cached[1]
            use = await self._json_get(base + "/usages", "usages")
        usage = ProviderUsage.parse(capacity, use.get("usages") or {})
        if usage.over() and not fresh:
            self._capacity.pop(provider_uuid, None)
            return await self.provider_usage(provider_uuid)
        return usage

    async def _json_get(self, path: str, op: str) -> dict[str, Any]:
        status, body = await self._request("GET", path, version="1.0", op=op)
        if status != 200 or not isinstance(body, dict):
            raise self._fail(PlacementHTTPError.answered(f"GET {path}", status, body))
        return body

    async def undo_once(self, consumer_uuid: str, claimed: Claimed | None) -> bool:
        """One attempt at undoing our write for a consumer, fenced on the consumer generation.

        ``PUT /allocations/{consumer}`` at 1.28 with what the consumer held before our write
        (``{}`` for a new consumer) and the generation our write left. When that generation
        is not known, the consumer is read and undone only while it holds exactly what we
        wrote (at the generation read). True: undone, or nothing was left. False: the
        consumer changed since our write (another process took it over, a later move): left
        alone, logged. PlacementError: try again."""
        gen: int | None
        if claimed is not None and claimed.generation is not None:
            gen, before = claimed.generation, claimed.before
            owner = (claimed.project_id, claimed.user_id)
        else:
            current = await self.get_allocations(consumer_uuid)
            held = _resources(current.get("allocations") or {})
            if not held:
                self._recent.pop(consumer_uuid, None)
                return True
            if claimed is not None and held != claimed.holds():
                return self._fenced(consumer_uuid, "it holds other allocations than our write")
            gen, before = current.get("consumer_generation"), {}
            owner = (current.get("project_id"), current.get("user_id"))
        status, answer = await self._put_at(
            consumer_uuid, before, gen, owner, op="delete_allocation"
        )
        if status == 204:
            self._recent.pop(consumer_uuid, None)
            return True
        if status == 409 and "consumer generation conflict" in error_detail(answer):
            return self._fenced(consumer_uuid, f"its generation is no longer {gen}")
        raise self._fail(
            PlacementHTTPError.answered(f"PUT /allocations/{consumer_uuid} (undo)", status, answer)
        )

    async def _put_at(
        self,
        consumer_uuid: str,
        allocations: Mapping[str, Mapping[str, int]],
        generation: int | None,
        owner: tuple[Any, Any],
        *,
        op: str,
    ) -> tuple[int, Any]:
        """PUT /allocations/{consumer} at 1.28: exactly ``allocations`` (``{}``: none), on
        condition that the consumer is at ``generation`` (Placement answers 409 otherwise)."""
        body = {
            "allocations": {rp: {"resources": dict(r)} for rp, r in allocations.items()},
            "consumer_generation": generation,
            "project_id": owner[0],
            "user_id": owner[1],
        }
        return await self._request(
            "PUT",
            f"/allocations/{consumer_uuid}",
            version=CONSUMER_GENERATION_VERSION,
            body=body,
            op=op,
        )

    def _fenced(self, consumer_uuid: str, why: str) -> bool:
        self._recent.pop(consumer_uuid, None)
        self._stats.fenced += 1
        LOG.warning(
            "placement: not undoing our claim of %s: %s (another process took it over, or it "
            "moved); left as it is",
            consumer_uuid,
            why,
        )
        return False

    async def delete_allocation(self, consumer_uuid: str) -> None:
        """Undo our write for a consumer (``undo_once``: fenced on the consumer generation),
        retried. When Placement still refuses, the daemon's client keeps the rollback for
        later (``pending``) and returns; a bare client raises AllocationDeleteFailed."""
        self._stats.deletes += 1
        last = ""
        for attempt in range(DELETE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(self._rng.uniform(0, self._claim_backoff / 8 * 2**attempt))
            try:
                await self.undo_once(consumer_uuid, self._recent.get(consumer_uuid))
                return
            except PlacementError as exc:
                last = str(exc)
        self._stats.delete_failures += 1
        if self.pending is not None:
            await self.pending.add(consumer_uuid, self._recent.get(consumer_uuid))
            return
        LOG.error(
            "placement: LEAKED ALLOCATION: could not delete the allocations of consumer %s "
            "after %d attempts: %s",
            consumer_uuid,
            DELETE_ATTEMPTS,
            last,
        )
        raise AllocationDeleteFailed(consumer_uuid=consumer_uuid, error=last)

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        """Delete every given consumer's allocations concurrently; raise if any is left."""
        uuids = list(dict.fromkeys(consumer_uuids))
        if not uuids:
            return
        results = await asyncio.gather(
            *(self.delete_allocation(u) for u in uuids), return_exceptions=True
        )
        failed = [
            (u, r) for u, r in zip(uuids, results, strict=True) if isinstance(r, BaseException)
        ]
        if failed:
            first = failed[0][1]
            if len(failed) == 1 and isinstance(first, AllocationDeleteFailed):
                raise first
            raise AllocationDeleteFailed(
                consumer_uuid=",".join(u for u, _ in failed),
                error="; ".join(str(r) for _, r in failed),
            )


def _resources(allocs: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """provider -> resources of an allocation (request or GET answer)."""
    return {
        rp: {rc: int(n) for rc, n in (a.get("resources") or {}).items()} for rp, a in allocs.items()
    }


def _doubled_up(source_allocs: Mapping[str, Any], dest: Mapping[str, Any]) -> dict[str, Any]:
    """nova's _move_operation_alloc_request: source allocations plus the new destination ones."""
    allocs: dict[str, Any] = {rp: {"resources": a["resources"]} for rp, a in source_allocs.items()}
    for rp, a in dest["allocations"].items():
        if rp not in source_allocs:
            allocs[rp] = a
    return {"allocations": allocs}
