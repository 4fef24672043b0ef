"""Small decision functions for the RPC tests (the scheduler core is not the subject here).

They implement the SchedulerAPI / HostStateEvents Protocols; the peers around them (RabbitMQ
and the oslo.messaging client) are real.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec, Selection

CELL = "8f3c2d1e-6b5a-4c9d-8e7f-1a2b3c4d5e6f"


def fake_selection(
    host: str, nodename: str, node: str | None = None, resources: Mapping[str, int] | None = None
) -> Selection:
    """A Selection of ``host`` in CELL; its allocation request takes ``resources`` from
    ``node`` (an empty request "{}" without them)."""
    node = node or str(uuid.uuid4())
    allocation = "{}"
    if resources is not None:
        allocation = json.dumps(
            {"allocations": {node: {"resources": dict(resources)}}, "mappings": {}}
        )
    return Selection(
        compute_node_uuid=node,
        service_host=host,
        nodename=nodename,
        cell_uuid=CELL,
        allocation_request=allocation,
        allocation_request_version="1.36",
        availability_zone="nova",
    )


@dataclass(frozen=True, slots=True)
class SchedulerCall:
    """One ``select_destinations`` call as a scheduler fake receives it."""

    ctx: RequestContext
    spec: RequestSpec
    instance_uuids: Sequence[str] | None
    return_objects: bool
    return_alternates: bool


class SchedulerFake:
    """The SchedulerAPI side every scheduler fake shares: each call is noted (``contexts``,
    ``specs``, then the ``note`` hook), and ``decide`` answers it."""

    def __init__(self) -> None:
        self.contexts: list[RequestContext] = []
        self.specs: list[RequestSpec] = []

    async def select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]:
        call = SchedulerCall(ctx, spec, instance_uuids, return_objects, return_alternates)
        self.contexts.append(ctx)
        self.specs.append(spec)
        self.note(call)
        return await self.decide(call)

    def note(self, call: SchedulerCall) -> None:
        """Called for each call before ``decide``: a subclass may record more."""

    async def decide(self, call: SchedulerCall) -> list[list[Selection]]:
        raise NotImplementedError


class RecordingScheduler(SchedulerFake):
    """Picks host ``cn-<i>`` for instance i, alternates ``alt-*``; NoValidHost above 64 VCPU.

    Each decision takes ``delay`` seconds and, with a ``gate``, waits until the test sets it
    (calls held in flight for as long as the test needs, however slow the machine)."""

    def __init__(
        self, delay: float = 0.0, name: str = "sched", gate: asyncio.Event | None = None
    ) -> None:
        super().__init__()
        self.delay = delay
        self.gate = gate
        self.name = name
        self.per_instance: Counter[str] = Counter()
        self.running = 0
        self.max_running = 0

    async def decide(self, call: SchedulerCall) -> list[list[Selection]]:
        spec, instance_uuids = call.spec, call.instance_uuids
        for u in instance_uuids or ():
            self.per_instance[u] += 1
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.gate is not None:
                await self.gate.wait()
        finally:
            self.running -= 1
        if spec.flavor.vcpus > 64:
            raise NoValidHost(reason=f"no host has {spec.flavor.vcpus} VCPU")
        out = []
        for i in range(len(instance_uuids) if instance_uuids else spec.num_instances):
            node = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"cn-{i}"))
            used = {"VCPU": spec.flavor.vcpus, "MEMORY_MB": spec.flavor.memory_mb}
            chosen = fake_selection(f"cn-{i}", f"cn-{i}.{self.name}", node, used)
            alts = [fake_selection(f"alt-{i}", f"alt-{i}")] if call.return_alternates else []
            out.append([chosen, *alts])
        return out


class RecordingEvents:
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.changed = asyncio.Event()

    def _note(self, name: str, value: Any) -> None:
        self.seen.append((name, value))
        self.changed.set()

    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None:
        self._note("update_aggregates", tuple(aggregates))

    async def delete_aggregate(self, aggregate: Aggregate) -> None:
        self._note("delete_aggregate", aggregate)

    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        self._note("update_instance_info", (host_name, tuple(instance_uuids)))

    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None:
        self._note("delete_instance_info", (host_name, instance_uuid))

    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None:
        self._note("sync_instance_info", (host_name, tuple(instance_uuids)))

    async def wait_for(self, count: int, limit: float = 10.0) -> None:
        async with asyncio.timeout(limit):
            while len(self.seen) < count:
                self.changed.clear()
                await self.changed.wait()
