"""``POST /v1/explain`` and ``GET /v1/capacity``: the dry runs of ``scheduling`` over HTTP.

A request is either a full RequestSpec primitive (``request_spec``, as the conductor sends it)
or the flavor words of the openstack CLI: ``vcpus``, ``ram`` (MiB), ``disk`` (GB),
``ephemeral``, ``swap``, ``extra_specs``, ``image_properties``, ``scheduler_hints``,
``availability_zone``, ``num_instances``, ``project_id``, ``user_id``. Those are read through
the codec's legacy request decoder, so an image property or hint means what it means in a
real request. ``host`` names a host to explain. For ``GET /v1/capacity`` the same words come
as query parameters (``extra_spec=K=V``, ``image_prop=K=V``, ``hint=K=V`` repeated);
``POST /v1/capacity`` takes the JSON body explain takes.

A flavor-words request carries no NUMA topology or PCI requests: nova-api derives those from
the flavor and image before it asks the scheduler. Pass a RequestSpec primitive for them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from typing import Any, TypeVar

from aiohttp import web

from asyncsched.exceptions import AsyncschedError
from asyncsched.objects.codec import CodecError, decode_request_spec, request_spec_from_legacy
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.capacity import Bounds, Capacity, capacity
from asyncsched.scheduling.explain import Explanation, explain
from asyncsched.scheduling.interfaces import Strategy

LOG = logging.getLogger(__name__)
_T = TypeVar("_T")

MAX_INSTANCES = 1000  # an explain of a larger multi-create is refused, not run
MAX_TOP = 100
#: query parameter (and CLI flag) -> the request field of KEY=VALUE pairs it fills
PAIR_PARAMS = {
    "extra_spec": "extra_specs",
    "image_prop": "image_properties",
    "hint": "scheduler_hints",
}
_WORDS = ("vcpus", "ram", "disk", "ephemeral", "swap", "availability_zone", "az",
          "num_instances", "project_id", "user_id", "host", "top")  # fmt: skip


class BadRequest(AsyncschedError, ValueError):
    """A request body or query the dry runs cannot read; the message says what and where."""


def _int(fields: Mapping[str, Any], name: str, default: int) -> int:
    value = fields.get(name, default)
    try:
        out = int(value)
    except (TypeError, ValueError):
        raise BadRequest(f"{name}: {value!r} is not an integer") from None
    if out < 0:
        raise BadRequest(f"{name}: {out} is negative")
    return out


def _pairs(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadRequest(f"{name}: expected an object of KEY: VALUE")
    return dict(value)


def spec_from_fields(fields: Mapping[str, Any]) -> RequestSpec:
    """The RequestSpec a request names (see the module docstring)."""
    try:
        if "request_spec" in fields:
            return decode_request_spec(fields["request_spec"], "request_spec")
        flavor = {
            "vcpus": _int(fields, "vcpus", 1),
            "memory_mb": _int(fields, "ram", 512),
            "root_gb": _int(fields, "disk", 0),
            "ephemeral_gb": _int(fields, "ephemeral", 0),
            "swap": _int(fields, "swap", 0),
            "flavorid": "explain",
            "name": "explain",
            "extra_specs": {
                k: str(v) for k, v in _pairs(fields.get("extra_specs"), "extra_specs").items()
            },
        }
        props = _pairs(fields.get("image_properties"), "image_properties")
        instance = {
            "availability_zone": fields.get("availability_zone") or fields.get("az"),
            "project_id": fields.get("project_id"),
            "user_id": fields.get("user_id"),
        }
        legacy = {
            "instance_type": flavor,
            "image": {"properties": props},
            "instance_properties": instance,
            "num_instances": max(1, _int(fields, "num_instances", 1)),
        }
        hints = _pairs(fields.get("scheduler_hints"), "scheduler_hints")
        return request_spec_from_legacy(legacy, {"scheduler_hints": hints})
    except CodecError as exc:
        raise BadRequest(str(exc)) from exc


def fields_from_query(query: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """``vcpus=2&extra_spec=hw:cpu_policy=dedicated&...`` -> the fields of a JSON request."""
    out: dict[str, Any] = {}
    for key, value in query:
        if key in PAIR_PARAMS:
            k, sep, v = value.partition("=")
            if not sep or not k:
                raise BadRequest(f"{key}: {value!r} is not KEY=VALUE")
            out.setdefault(PAIR_PARAMS[key], {})[k] = v
        elif key in _WORDS:
            out[key] = value
        else:
            raise BadRequest(f"unknown parameter {key!r}")
    return out


def query_from_fields(fields: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The inverse of ``fields_from_query`` (what ``asyncsched capacity`` sends)."""
    out = [(k, str(v)) for k, v in fields.items() if k in _WORDS and v is not None]
    for param, key in PAIR_PARAMS.items():
        out += [(param, f"{k}={v}") for k, v in (fields.get(key) or {}).items()]
    return out


class Busy(AsyncschedError):
    """Every dry-run slot is taken (answered 429)."""


class DryRunSlots:
    """At most ``size`` dry runs at once: a capacity run holds CPU for seconds at 10,000
    hosts, and operators' questions must not crowd out the scheduling they ask about. One
    more waits up to ``wait`` seconds for a slot, then is told the endpoint is busy."""

    def __init__(self, size: int) -> None:
        self._sem = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def slot(self, wait: float) -> AsyncIterator[None]:
        if not self._sem.locked():
            await self._sem.acquire()  # free: returns at once
        elif wait <= 0:
            raise Busy
        else:
            try:
                await asyncio.wait_for(self._sem.acquire(), wait)
            except TimeoutError:
                raise Busy from None
        try:
            yield
        finally:
            self._sem.release()


class ExplainAPI:
    """The handlers, over the live driver (its current config, cache and Placement; under
    either driver the dry runs are the filter scheduler's).

    Each run is bounded: a slot (429 when none is free), a deadline
    (``[asyncsched] admin_dry_run_timeout``), capacity's count cap, and a client that goes
    away cancels its run (aiohttp's handler cancellation); ``stats`` counts each outcome."""

    def __init__(self, manager: Strategy) -> None:
        self._mgr = manager
        self._slots = DryRunSlots(manager.config.asyncsched.admin_max_dry_runs)
        self.stats = {"answered": 0, "busy": 0, "cancelled": 0, "timed_out": 0, "bounded": 0}

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/explain", self.explain),
            web.get("/v1/capacity", self.capacity),
            web.post("/v1/capacity", self.capacity),  # a JSON body, e.g. a RequestSpec
        ]

    async def explain(self, request: web.Request) -> web.Response:
        try:
            body = await _body(request)
            spec = spec_from_fields(body)
            top = min(MAX_TOP, _int(body, "top", 10))
        except BadRequest as exc:
            return _error(str(exc))
        if spec.num_instances > MAX_INSTANCES:
            return _error(f"num_instances: at most {MAX_INSTANCES} in an explain")
        host = body.get("host")
        mgr = self._mgr

        def run() -> Coroutine[Any, Any, Explanation]:
            return explain(
                mgr.config,
                mgr.cache,
                mgr.placement,
                spec,
                clock=mgr.clock,
                host=str(host) if host else None,
                top=top,
            )

        out = await self._bounded("explain", run)
        if isinstance(out, web.Response):
            return out
        LOG.info("explain (dry run, nothing claimed): %s", out.summary)
        return web.json_response(out.as_dict())

    async def capacity(self, request: web.Request) -> web.Response:
        try:
            if request.method == "POST":
                fields = await _body(request)
            else:
                fields = fields_from_query(request.query.items())
            spec = spec_from_fields(fields)
        except BadRequest as exc:
            return _error(str(exc))
        mgr = self._mgr

        def run() -> Coroutine[Any, Any, Capacity]:
            # the run stops itself at its deadline (answering what it counted); the timeout
            # of _bounded is only the backstop for a step that does not yield
            o = mgr.config.asyncsched
            bounds = Bounds(o.capacity_max_instances, time.monotonic() + o.admin_dry_run_timeout)
            return capacity(
                mgr.config, mgr.cache, mgr.placement, spec, clock=mgr.clock, bounds=bounds
            )

        out = await self._bounded("capacity", run, grace=1.0)
        if isinstance(out, web.Response):
            return out
        if out.bounded:
            self.stats["bounded"] += 1
        LOG.info(
            "capacity (dry run, nothing claimed): %s%d more of %d MiB / %d vCPU in %.2f s",
            "at least " if out.bounded else "",
            out.total,
            spec.flavor.memory_mb,
            spec.flavor.vcpus,
            out.seconds,
        )
        return web.json_response(out.as_dict())

    async def _bounded(
        self, what: str, run: Callable[[], Coroutine[Any, Any, _T]], grace: float = 0.0
    ) -> _T | web.Response:
        """``run()`` in a slot, within the deadline (from when the slot is taken); 429 when
        busy, 503 past the deadline."""
        o = self._mgr.config.asyncsched
        try:
            async with self._slots.slot(o.admin_dry_run_queue_timeout):
                async with asyncio.timeout(o.admin_dry_run_timeout + grace):
                    out = await run()
        except Busy:
            self.stats["busy"] += 1
            return web.json_response(
                {"error": f"another dry run is running; {what} again later"},
                status=429,
                headers={"Retry-After": "1"},
            )
        except TimeoutError:
            self.stats["timed_out"] += 1
            return web.json_response(
                {
                    "error": f"{what} ran longer than {o.admin_dry_run_timeout:g} s "
                    "([asyncsched] admin_dry_run_timeout)"
                },
                status=503,
            )
        except asyncio.CancelledError:
            self.stats["cancelled"] += 1
            LOG.info("%s cancelled: the client went away", what)
            raise
        self.stats["answered"] += 1
        return out


async def _body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        raise BadRequest("the body is not JSON") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _error(message: str) -> web.Response:
    return web.json_response({"error": message}, status=400)
