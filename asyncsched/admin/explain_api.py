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
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web

from asyncsched.exceptions import AsyncschedError
from asyncsched.objects.codec import CodecError, decode_request_spec, request_spec_from_legacy
from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.capacity import capacity
from asyncsched.scheduling.explain import explain
from asyncsched.scheduling.manager import SchedulerManager

LOG = logging.getLogger(__name__)

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


class ExplainAPI:
    """The handlers, over the live manager (its current config, cache and Placement)."""

    def __init__(self, manager: SchedulerManager) -> None:
        self._mgr = manager
        # one dry run at a time: a capacity run holds CPU for seconds at 10,000 hosts, and
        # operators' questions must not crowd out the scheduling they ask about
        self._one_at_a_time = asyncio.Lock()

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
        async with self._one_at_a_time:
            out = await explain(
                mgr.config,
                mgr.cache,
                mgr.placement,
                spec,
                clock=mgr.clock,
                host=str(host) if host else None,
                top=top,
            )
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
        async with self._one_at_a_time:
            out = await capacity(mgr.config, mgr.cache, mgr.placement, spec, clock=mgr.clock)
        LOG.info(
            "capacity (dry run, nothing claimed): %d more of %d MiB / %d vCPU in %.2f s",
            out.total,
            spec.flavor.memory_mb,
            spec.flavor.vcpus,
            out.seconds,
        )
        return web.json_response(out.as_dict())


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
