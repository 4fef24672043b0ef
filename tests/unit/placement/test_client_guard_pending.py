"""The client's overcommit guard and pending rollbacks over a small local Placement stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aiohttp import web

from asyncsched.placement.pending import Journal, PendingRollbacks
from tests.support.placement_stub import client_for

AR = {"allocations": {"rp1": {"resources": {"VCPU": 1}}}}


class Stub:
    """Placement for one provider with VCPU capacity ``cap``; ``used`` as it reports it."""

    def __init__(
        self, cap: int, used: int, *, delete_status: int = 204, held: dict[str, Any] | None = None
    ) -> None:
        self.cap, self.used = cap, used
        self.delete_status = delete_status
        self.held = held or {}  # what the consumer holds before the claim (a move's source)
        self.calls: list[str] = []
        self.bodies: list[dict[str, Any]] = []

    def routes(self) -> dict[tuple[str, str], Any]:
        async def put(request: web.Request) -> web.Response:
            body = await request.json()
            self.bodies.append(body)
            if body["allocations"] == self.held:  # an undo: what was there before, fenced
                self.calls.append("UNDO")
                if self.delete_status == 204:
                    self.used -= 1
                return web.Response(status=self.delete_status, text="x")
            self.calls.append("PUT")
            self.used += 1
            return web.Response(status=204)

        async def get_alloc(request: web.Request) -> web.Response:
            self.calls.append("GET allocations")
            return web.json_response({"allocations": self.held, "consumer_generation": 7})

        async def inventories(request: web.Request) -> web.Response:
            self.calls.append("GET inventories")
            inv = {"VCPU": {"total": self.cap, "reserved": 0, "allocation_ratio": 1.0}}
            return web.json_response({"inventories": inv, "resource_provider_generation": 1})

        async def usages(request: web.Request) -> web.Response:
            self.calls.append("GET usages")
            return web.json_response({"usages": {"VCPU": self.used}})

        return {
            ("PUT", "/allocations/{c}"): put,
            ("GET", "/allocations/{c}"): get_alloc,
            ("GET", "/resource_providers/{rp}/inventories"): inventories,
            ("GET", "/resource_providers/{rp}/usages"): usages,
        }


async def test_guarded_claim_over_capacity_is_backed_out(stack: list[Any]) -> None:
    stub = Stub(cap=2, used=2)  # another scheduler filled it meanwhile
    client, _ = await client_for(stack, stub.routes(), overcommit_guard=True)
    assert client.guard is not None
    client.guard.backoff = 0.01
    assert not await client.claim("c1", AR, project_id="p", user_id="u")
    assert stub.calls[-1] == "UNDO" and stub.used == 2
    assert stub.bodies[-1]["consumer_generation"] == 1  # fenced on what our claim left
    assert client.health()["overcommit_guard"]["backed_out"] == 1


async def test_guarded_claim_within_capacity_is_kept(stack: list[Any]) -> None:
    stub = Stub(cap=2, used=1)
    client, _ = await client_for(stack, stub.routes(), overcommit_guard=True)
    assert await client.claim("c1", AR, project_id="p", user_id="u")
    assert "UNDO" not in stub.calls and "GET usages" in stub.calls


async def test_a_move_claim_backed_out_puts_the_source_allocation_back(stack: list[Any]) -> None:
    """Only the destination's providers are checked; backing out undoes our write alone."""
    source = {"src": {"resources": {"VCPU": 1}}}
    stub = Stub(cap=1, used=1, held=source)  # rp1 (the destination) is full meanwhile
    client, _ = await client_for(stack, stub.routes(), overcommit_guard=True)
    assert client.guard is not None
    client.guard.backoff = 0.01
    assert not await client.claim("c1", AR, project_id="p", user_id="u", may_have_allocations=True)
    claim, undo = stub.bodies
    assert (
        claim["allocations"] == {**source, **AR["allocations"]}
        and claim["consumer_generation"] == 7
    )
    assert undo["allocations"] == source and undo["consumer_generation"] == 8


async def test_unguarded_client_reads_no_usage(stack: list[Any]) -> None:
    stub = Stub(cap=1, used=5)
    client, _ = await client_for(stack, stub.routes())
    assert client.guard is None
    assert await client.claim("c1", AR, project_id="p", user_id="u")
    assert stub.calls == ["PUT"]


async def test_failed_delete_is_kept_with_the_claimed_allocation(
    stack: list[Any], tmp_path: Path
) -> None:
    stub = Stub(cap=4, used=0, delete_status=503)
    client, _ = await client_for(stack, stub.routes())
    client.pending = PendingRollbacks(client, Journal(tmp_path / "j.json"))
    assert await client.claim("c1", AR, project_id="p", user_id="u")
    await client.rollback(["c1"])  # Placement refuses: kept, not raised
    assert "c1" in client.pending
    [entry] = Journal(tmp_path / "j.json").load()
    assert entry.consumer_uuid == "c1" and entry.claimed is not None
    assert entry.claimed.allocations == {"rp1": {"VCPU": 1}} and entry.claimed.generation == 1
    # the instance is claimed again (e.g. a new request for it): no longer to be deleted
    assert await client.claim("c1", AR, project_id="p", user_id="u")
    assert "c1" not in client.pending and Journal(tmp_path / "j.json").load() == []


async def test_capacity_is_reused_but_read_again_before_backing_out(stack: list[Any]) -> None:
    stub = Stub(cap=2, used=0)
    client, _ = await client_for(stack, stub.routes(), overcommit_guard=True)
    assert await client.claim("c1", AR, project_id="p", user_id="u")
    assert await client.claim("c2", AR, project_id="p", user_id="u")
    assert stub.calls.count("GET inventories") == 1 and stub.calls.count("GET usages") == 2
    stub.cap = 10  # the operator grew the inventory: the cached capacity (2) is stale
    assert await client.claim("c3", AR, project_id="p", user_id="u")
    assert stub.calls.count("GET inventories") == 2 and "UNDO" not in stub.calls
