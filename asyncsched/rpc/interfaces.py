"""What the RPC layer calls: the decision (SchedulerAPI) and the host-state cache (events).

The RPC server decodes the wire into these typed calls and encodes what they return; the
implementations never see a raw message or primitive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from asyncsched.objects.models import Aggregate, RequestContext, RequestSpec, Selection


class SchedulerAPI(Protocol):
    async def select_destinations(
        self,
        ctx: RequestContext,
        spec: RequestSpec,
        instance_uuids: Sequence[str] | None,
        return_objects: bool,
        return_alternates: bool,
    ) -> list[list[Selection]]: ...

    # raises NoValidHost / other NovaException subclasses


class HostStateEvents(Protocol):
    async def update_aggregates(self, aggregates: Sequence[Aggregate]) -> None: ...
    async def delete_aggregate(self, aggregate: Aggregate) -> None: ...
    async def update_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None: ...
    async def delete_instance_info(self, host_name: str, instance_uuid: str) -> None: ...
    async def sync_instance_info(self, host_name: str, instance_uuids: Sequence[str]) -> None: ...
