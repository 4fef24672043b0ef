"""One big select_destinations call through the whole server path, without a broker.

Shared by the loop-pacing tests (``tests/unit/scheduling/test_manager_pacing.py``) and
``bench/bench_loop_hold.py``: a roomy in-memory cloud whose Placement answers at once, the real
SchedulerManager, and an RPCServer whose channel keeps the reply's bytes (parsed only after the
measurement: a 17 MB parse is not the server's work). ``serve_call`` reads, decodes and
validates the body, decides, encodes and escapes the reply as the server does for a message
from RabbitMQ.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, cast

from aio_pika.abc import AbstractIncomingMessage

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, RequestSpec
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.rpc.server import RPCServer
from asyncsched.scheduling.interfaces import HostCache
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.host_state import HostState
from tests.support.oslo_caller import request_spec_primitive
from tests.support.rpc_fakes import Events, FakeMessage, Journal
from tests.support.sched_helpers import NOW, config, host

#: the two reply forms: nova 34's (instance uuids, claims, Selection objects with alternates)
#: and the legacy one (no instance uuids, return_objects=False: host dicts, nothing claimed)
FORMS = ("objects", "legacy")


class CountingPlacement:
    """Every host is a candidate; claims always succeed (O(1) each, unlike FakePlacement)."""

    def __init__(self, hosts: list[HostState]) -> None:
        self.hosts = hosts
        self.claims = 0
        self.rolled_back = 0

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        want = dict(request.merged_resources())
        return Candidates.parse(
            {
                "allocation_requests": [
                    {"allocations": {h.uuid: {"resources": want}}, "mappings": {"": [h.uuid]}}
                    for h in self.hosts
                ],
                "provider_summaries": {h.uuid: {"resources": {}, "traits": []} for h in self.hosts},
            }
        )

    async def claim(
        self, consumer_uuid: str, allocation_request: Mapping[str, Any], **kw: Any
    ) -> bool:
        self.claims += 1
        return True

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        self.rolled_back += len(list(consumer_uuids))


def roomy_cloud(n: int) -> list[HostState]:
    """``n`` hosts with room for any number of tiny instances."""
    return [
        host(
            f"big{i}",
            vcpus_total=1_000_000,
            total_usable_ram_mb=10**9,
            free_ram_mb=10**9,
            free_disk_mb=10**11,
            total_usable_disk_gb=10**8,
        )
        for i in range(n)
    ]


def tiny_spec(num: int) -> RequestSpec:
    flavor = Flavor(id=1, name="m1.tiny", flavorid="1", memory_mb=512, vcpus=1, root_gb=1)
    return RequestSpec(flavor=flavor, num_instances=num, project_id="p", user_id="u")


def call_body(form: str, num: int) -> bytes:
    """An oslo call of select_destinations for ``num`` tiny instances, in ``form``."""
    objects = form == "objects"
    inner = {
        "method": "select_destinations",
        "version": "4.5",
        "args": {
            "spec_obj": request_spec_primitive(tiny_spec(num)),
            "instance_uuids": [str(uuid.uuid4()) for _ in range(num)] if objects else None,
            "return_objects": objects,
            "return_alternates": objects,
        },
        "_msg_id": uuid.uuid4().hex,
        "_reply_q": "reply_big_call",
        "_unique_id": uuid.uuid4().hex,
        "_context_request_id": f"req-{uuid.uuid4()}",
    }
    return json.dumps({"oslo.version": "2.0", "oslo.message": json.dumps(inner)}).encode()


class _Exchange:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    async def publish(self, message: Any, routing_key: str, **kw: Any) -> None:
        self.bodies.append(message.body)


class _Channel:
    def __init__(self) -> None:
        self.default_exchange = _Exchange()


class BigCallServer:
    """An RPCServer over the real SchedulerManager, ``cache`` and an instant Placement."""

    def __init__(self, cache: HostCache, hosts: list[HostState], conf: Config | None = None):
        self.config = conf if conf is not None else config()
        self.placement = CountingPlacement(hosts)
        self.manager = SchedulerManager(self.config, cache, self.placement, clock=lambda: NOW)
        self.server = RPCServer(self.config, self.manager, Events())
        self._channel = _Channel()
        self.server._link._publisher = cast(Any, self._channel)
        self.server._link._connected.set()

    async def serve(self, body: bytes) -> None:
        """The server's whole path for one message (read, decide, reply, ack)."""
        message = cast(AbstractIncomingMessage, FakeMessage(Journal(), body))
        await self.server._handle(self.server.topology.queues[0], message)

    def last_reply(self) -> dict[str, Any]:
        """The inner oslo message of the last reply published."""
        reply: dict[str, Any] = json.loads(
            json.loads(self._channel.default_exchange.bodies[-1])["oslo.message"]
        )
        return reply
