"""oslo's RPCDispatcher rules: which endpoint serves (namespace, version, method).

nova-scheduler exposes two endpoints: the SchedulerManager (namespace None, version 4.5) and
BaseRPCAPI (namespace ``baseapi``, version 1.1). A request is served by the first endpoint
whose namespace matches and whose version is compatible; if some are compatible but none has
the method, it is NoSuchMethod, if none is compatible, UnsupportedVersion.
"""

from __future__ import annotations

from dataclasses import dataclass

from asyncsched.exceptions import AsyncschedError

SCHEDULER_VERSION = "4.5"
BASEAPI_VERSION = "1.1"

SCHEDULER_CALLS = frozenset({"select_destinations"})
SCHEDULER_CASTS = frozenset(
    {
        "update_aggregates",
        "delete_aggregate",
        "update_instance_info",
        "delete_instance_info",
        "sync_instance_info",
    }
)


@dataclass(frozen=True, slots=True)
class Endpoint:
    name: str
    namespace: str | None
    version: str
    methods: frozenset[str]


SCHEDULER_ENDPOINT = Endpoint(
    "scheduler", None, SCHEDULER_VERSION, SCHEDULER_CALLS | SCHEDULER_CASTS
)
BASEAPI_ENDPOINT = Endpoint(
    "baseapi", "baseapi", BASEAPI_VERSION, frozenset({"ping", "get_backdoor_port"})
)
ENDPOINTS = (SCHEDULER_ENDPOINT, BASEAPI_ENDPOINT)


class DispatchError(AsyncschedError):
    pass


class NoSuchMethod(DispatchError):
    def __init__(self, method: str) -> None:
        super().__init__(method)
        self.method = method


class UnsupportedVersion(DispatchError):
    def __init__(self, version: str, method: str) -> None:
        super().__init__(version, method)
        self.version = version
        self.method = method


def _parse(version: str) -> tuple[int, int, int] | None:
    parts = version.split(".")
    if not 1 <= len(parts) <= 3:
        return None
    try:
        nums = [int(p) for p in parts]
    except ValueError:
        return None
    while len(nums) < 3:
        nums.append(0)
    return nums[0], nums[1], nums[2]


def version_is_compatible(imp_version: str, version: str) -> bool:
    """oslo ``_utils.version_is_compatible``: same major, requested minor/revision not newer."""
    imp = _parse(imp_version)
    req = _parse(version)
    if imp is None or req is None:
        return False
    if imp[0] != req[0]:
        return False
    if imp[1] < req[1]:
        return False
    return not (imp[1] == req[1] and imp[2] < req[2])


def resolve(
    namespace: str | None,
    version: str,
    method: str,
    endpoints: tuple[Endpoint, ...] = ENDPOINTS,
) -> Endpoint:
    """The endpoint that serves the request, or NoSuchMethod / UnsupportedVersion."""
    compatible = False
    for ep in endpoints:
        if ep.namespace != namespace:
            continue
        if not version_is_compatible(ep.version, version):
            continue
        compatible = True
        # DefaultRPCAccessPolicy: private names are never callable.
        if not method.startswith("_") and method in ep.methods:
            return ep
    if compatible:
        raise NoSuchMethod(method)
    raise UnsupportedVersion(version, method)
