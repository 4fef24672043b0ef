"""What each RPC method does: decode its arguments, call the typed API, encode what it returns.

``dispatcher`` decides *whether* a request may be served (namespace, version, method name);
this module is the explicit table of *what* serves it, one entry per method of each endpoint.
A method the dispatcher admits but the table lacks is caught when the table is built, not when a
request arrives. Bad arguments, and requests beyond ``validation``'s bounds, raise
``CodecError``; the server turns that into oslo's ``ValueError`` failure reply.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from asyncsched.common.pacing import Pacer
from asyncsched.objects import codec
from asyncsched.objects.codec import CodecError
from asyncsched.rpc import dispatcher, paced, validation
from asyncsched.rpc.interfaces import HostStateEvents, SchedulerAPI
from asyncsched.rpc.wire import IncomingMessage

Handler = Callable[[IncomingMessage], Awaitable[Any]]
MethodTable = Mapping[str, Mapping[str, Handler]]  # endpoint name -> method name -> handler


def method_table(
    scheduler: SchedulerAPI,
    events: HostStateEvents,
    bounds: validation.RequestBounds | None = None,
) -> MethodTable:
    """The handlers of both endpoints, checked against what the dispatcher admits."""
    casts = _EventCasts(events)
    table: dict[str, dict[str, Handler]] = {
        dispatcher.SCHEDULER_ENDPOINT.name: {
            "select_destinations": _SelectDestinations(
                scheduler, bounds or validation.RequestBounds()
            ),
            "update_aggregates": casts.update_aggregates,
            "delete_aggregate": casts.delete_aggregate,
            "update_instance_info": casts.update_instance_info,
            "delete_instance_info": casts.delete_instance_info,
            "sync_instance_info": casts.sync_instance_info,
        },
        dispatcher.BASEAPI_ENDPOINT.name: {
            "ping": _ping,
            "get_backdoor_port": _no_backdoor,
        },
    }
    for endpoint in dispatcher.ENDPOINTS:
        served = frozenset(table.get(endpoint.name, {}))
        if served != endpoint.methods:
            raise RuntimeError(
                f"RPC endpoint {endpoint.name!r}: dispatcher admits {sorted(endpoint.methods)} "
                f"but the method table serves {sorted(served)}"
            )
    return table


class _SelectDestinations:
    """``select_destinations``: spec_obj (4.0+ objects) or the legacy request_spec dicts."""

    def __init__(self, scheduler: SchedulerAPI, bounds: validation.RequestBounds) -> None:
        self._scheduler = scheduler
        self._bounds = bounds

    async def __call__(self, incoming: IncomingMessage) -> Any:
        args = incoming.args
        # The server's check_message bounded the whole message's nesting (and strings) in
        # one walk before dispatch: the decoders do not walk the spec again.
        if args.get("spec_obj") is not None:
            spec_path = "args.spec_obj"
            spec = codec.decode_request_spec(args["spec_obj"], spec_path, nesting_checked=True)
        elif args.get("request_spec") is not None:
            spec_path = "args.request_spec"
            spec = codec.request_spec_from_legacy(
                args["request_spec"],
                args.get("filter_properties"),
                spec_path,
                nesting_checked=True,
            )
        else:
            raise CodecError("args", "select_destinations needs spec_obj or request_spec")
        raw_uuids = args.get("instance_uuids")
        instance_uuids = (
            None if raw_uuids is None else list(_str_list(raw_uuids, "args.instance_uuids"))
        )
        validation.check_select_destinations(
            spec, instance_uuids, self._bounds, spec_path=spec_path
        )
        return_objects = _bool_arg(args, "return_objects")
        return_alternates = _bool_arg(args, "return_alternates")
        selections = await self._scheduler.select_destinations(
            incoming.context, spec, instance_uuids, return_objects, return_alternates
        )
        # Encoded one instance at a time with loop turns: 5,000 with alternates is ~17 MB.
        per_instance = (
            encoded
            for one in selections
            for encoded in codec.encode_selections([one], return_objects)
        )
        return await paced.dumps_list(per_instance, Pacer())


class _EventCasts:
    """The five host-state casts, decoded into ``HostStateEvents`` calls."""

    def __init__(self, events: HostStateEvents) -> None:
        self._events = events

    async def update_aggregates(self, incoming: IncomingMessage) -> None:
        aggregates = codec.decode_aggregates(incoming.args.get("aggregates"), "args.aggregates")
        await self._events.update_aggregates(aggregates)

    async def delete_aggregate(self, incoming: IncomingMessage) -> None:
        raw = incoming.args.get("aggregate")
        if raw is None:
            raise CodecError("args.aggregate", "required argument is missing")
        await self._events.delete_aggregate(codec.decode_aggregate(raw, "args.aggregate"))

    async def update_instance_info(self, incoming: IncomingMessage) -> None:
        host = _str_arg(incoming.args, "host_name")
        uuids = codec.decode_instance_uuids(
            incoming.args.get("instance_info"), "args.instance_info"
        )
        await self._events.update_instance_info(host, uuids)

    async def delete_instance_info(self, incoming: IncomingMessage) -> None:
        host = _str_arg(incoming.args, "host_name")
        await self._events.delete_instance_info(host, _str_arg(incoming.args, "instance_uuid"))

    async def sync_instance_info(self, incoming: IncomingMessage) -> None:
        host = _str_arg(incoming.args, "host_name")
        uuids = _str_list(incoming.args.get("instance_uuids"), "args.instance_uuids")
        await self._events.sync_instance_info(host, uuids)


async def _ping(incoming: IncomingMessage) -> Any:
    """oslo's BaseRPCAPI.ping: echo ``arg`` with the service name."""
    return {"service": "scheduler", "arg": incoming.args.get("arg")}


async def _no_backdoor(incoming: IncomingMessage) -> None:
    """BaseRPCAPI.get_backdoor_port: there is no eventlet backdoor here."""
    return None


def _str_arg(args: Mapping[str, Any], name: str) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise CodecError(f"args.{name}", "a string is required")
    return value


def _str_list(value: Any, path: str) -> Sequence[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CodecError(path, "a list of strings is required")
    return tuple(value)


def _bool_arg(args: Mapping[str, Any], name: str) -> bool:
    value = args.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise CodecError(f"args.{name}", "a boolean is required")
    return value
