"""Small fakes of the host-state cache and of Placement (manager unit tests, decision benches)."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any

from asyncsched.common.pacing import Pacer
from asyncsched.exceptions import ConsumerHeld, PlacementError
from asyncsched.objects.models import Aggregate, CellMapping, RequestSpec
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.state.host_state import HostState


class FakeCache:
    """Holds HostStates; consume/release do nova's arithmetic like the real cache."""

    def __init__(self, hosts: list[HostState], aggregates: list[Aggregate] = ()) -> None:  # type: ignore[assignment]
        self.hosts = {h.uuid: h for h in hosts}
        self._aggs = list(aggregates)
        self.consumed: dict[str, tuple[str, Any]] = {}  # instance uuid -> (host uuid, flavor)
        self.fresh_reads = 0  # fresh_services() calls (one per request)

    @property
    def hosts_epoch(self) -> int:
        """Tests add and remove hosts in ``hosts`` directly: the epoch is the key set."""
        return hash(tuple(self.hosts))

    def get_by_uuids(self, uuids: Iterable[str]) -> list[HostState]:
        return [self.hosts[u] for u in uuids if u in self.hosts]

    def get_by_host_node(self, host: str, node: str | None = None) -> list[HostState]:
        return [
            h
            for h in self.hosts.values()
            if h.host == host and (node is None or h.nodename == node)
        ]

    def all_hosts(self) -> list[HostState]:
        return list(self.hosts.values())

    def cells(self) -> list[CellMapping]:
        return [CellMapping(uuid=u) for u in sorted({h.cell_uuid for h in self.hosts.values()})]

    def aggregates(self) -> list[Aggregate]:
        return list(self._aggs)

    def consume_locked(
        self,
        host: HostState,
        spec: RequestSpec,
        instance_uuid: str,
        *,
        placed: object | None = None,
    ) -> None:
        f = spec.flavor
        host.free_ram_mb -= f.memory_mb
        host.free_disk_mb -= (f.root_gb + f.ephemeral_gb) * 1024
        host.vcpus_used += f.vcpus
        host.num_instances += 1
        host.num_io_ops += 1
        host.instances.add(instance_uuid)
        host.touch()
        self.consumed[instance_uuid] = (host.uuid, f)

    async def release(self, host: HostState, instance_uuid: str) -> None:
        got = self.consumed.pop(instance_uuid, None)
        if got is None:
            return
        f = got[1]
        host.free_ram_mb += f.memory_mb
        host.free_disk_mb += (f.root_gb + f.ephemeral_gb) * 1024
        host.vcpus_used -= f.vcpus
        host.num_instances -= 1
        host.num_io_ops -= 1
        host.instances.discard(instance_uuid)
        host.touch()

    async def release_many(self, consumed: Iterable[tuple[HostState, str]]) -> None:
        pacer = Pacer()  # as HostStateCache.release_many, which gives the loop turns
        for host, instance_uuid in consumed:
            await self.release(host, instance_uuid)
            await pacer.tick()

    async def fresh_services(self) -> None:
        await (await self.begin_fresh_services())

    async def begin_fresh_services(self) -> Awaitable[None]:
        self.fresh_reads += 1
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


class FakePlacement:
    """Inventory from the HostStates; allocations by consumer; optional injected failures."""

    def __init__(self, hosts: list[HostState]) -> None:
        self.inventory: dict[str, dict[str, int]] = {
            h.uuid: {
                "VCPU": int(h.vcpus_total * h.cpu_allocation_ratio),
                "MEMORY_MB": h.total_usable_ram_mb,
                "DISK_GB": h.total_usable_disk_gb,
            }
            for h in hosts
        }
        self.allocations: dict[str, dict[str, Any]] = {}
        self.queries: list[ResourceRequest] = []
        self.refuse: set[str] = set()  # rp uuids whose claims fail
        self.broken = False
        self.claims: list[tuple[str, str]] = []
        self.taken_over: list[str] = []

    def _used(self, rp: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for alloc in self.allocations.values():
            for rc, n in alloc["allocations"].get(rp, {}).get("resources", {}).items():
                used[rc] = used.get(rc, 0) + n
        return used

    async def get_allocation_candidates(self, request: ResourceRequest) -> Candidates:
        self.queries.append(request)
        if self.broken:
            raise PlacementError("placement is down")
        want = request.merged_resources()
        in_tree = next((g.in_tree for g in request.groups if g.in_tree), None)
        areqs: list[dict[str, Any]] = []
        summaries: dict[str, Any] = {}
        for rp, inv in self.inventory.items():
            if in_tree and rp != in_tree:
                continue
            used = self._used(rp)
            if all(inv.get(rc, 0) - used.get(rc, 0) >= n for rc, n in want.items()):
                areqs.append(
                    {"allocations": {rp: {"resources": dict(want)}}, "mappings": {"": [rp]}}
                )
                resources = {
                    rc: {"capacity": total, "used": used.get(rc, 0)} for rc, total in inv.items()
                }
                summaries[rp] = {"resources": resources, "traits": []}
        if request.limit is not None:  # Placement's limit: the first N (it shuffles; we don't)
            areqs = areqs[: request.limit]
            kept = {rp for ar in areqs for rp in ar["allocations"]}
            summaries = {rp: v for rp, v in summaries.items() if rp in kept}
        return Candidates.parse({"allocation_requests": areqs, "provider_summaries": summaries})

    async def claim(
        self,
        consumer_uuid: str,
        allocation_request: Mapping[str, Any],
        *,
        project_id: str,
        user_id: str,
        allocation_request_version: str = "1.36",
        may_have_allocations: bool = False,
    ) -> bool:
        rp = next(iter(allocation_request["allocations"]))
        self.claims.append((consumer_uuid, rp))
        held = self.allocations.get(consumer_uuid)
        if held is not None and not may_have_allocations:  # as PlacementClient reports it
            mine = {r: a["resources"] for r, a in held["allocations"].items()}
            if held["allocations"] == allocation_request["allocations"]:
                return True
            raise ConsumerHeld(
                consumer_uuid=consumer_uuid, error="conflict", held=mine, generation=1
            )
        if rp in self.refuse:
            return False
        used = self._used(rp)
        for rc, n in allocation_request["allocations"][rp]["resources"].items():
            if self.inventory[rp].get(rc, 0) - used.get(rc, 0) < n:
                return False
        claimed = copy.deepcopy(dict(allocation_request))
        if held is not None:  # a move: nova's claim_resources merges what the consumer holds
            claimed["allocations"] = {**claimed["allocations"], **held["allocations"]}
        self.allocations[consumer_uuid] = claimed
        return True

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
        """PlacementClient.take_over: the held allocation written again (now ours)."""
        self.taken_over.append(consumer_uuid)
        held = self.allocations.get(consumer_uuid)
        wanted = {rp: {"resources": dict(r)} for rp, r in (before or {}).items()}
        if held is None or held["allocations"] != {**allocation_request["allocations"], **wanted}:
            return False  # it changed since it was read: Placement refuses the generation
        return True

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        for u in consumer_uuids:
            self.allocations.pop(u, None)
