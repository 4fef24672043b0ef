"""The Placement mirror against the real Placement on PostgreSQL and on MariaDB (issue #25),
read through a read-only login: load, refresh after every kind of write, claim refusal,
database outage, single flight.
"""

from __future__ import annotations

import asyncio
import time
import uuid as uuidlib

import pytest

from asyncsched.conf.options import PlacementOptions
from asyncsched.objects.models import RequestGroup
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import CandidateSource
from asyncsched.state.placement_mirror import PlacementMirror
from tests.support.mirror_role import ReadOnlyRole
from tests.support.mirror_views import api_view, mirror_view, normalised
from tests.support.nova_db import BACKENDS
from tests.support.placement_server import PlacementServer, Seeder

pytestmark = [
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.parametrize("db_backend", BACKENDS, scope="module"),
]


def make_mirror(
    role: ReadOnlyRole, *, interval: float = 0.2, max_age: float = 30.0
) -> PlacementMirror:
    return PlacementMirror(role.url, interval=interval, max_age=max_age, query_timeout=5.0)


def vcpu_request(n: int = 1, *, limit: int | None = None, **kw: object) -> ResourceRequest:
    g = RequestGroup(use_same_provider=False, resources={"VCPU": n, "MEMORY_MB": 256}, **kw)  # type: ignore[arg-type]
    return ResourceRequest(groups=(g,), limit=limit)


async def wait_for(cond: object, timeout: float = 5.0) -> None:  # noqa: ASYNC109
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.05)


async def put_alloc(s: Seeder, consumer: str, rp: str, resources: dict[str, int]) -> int:
    status, _ = await s.call(
        "PUT",
        f"/allocations/{consumer}",
        {
            "allocations": {rp: {"resources": resources}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
        },
    )
    return status


async def test_load_matches_placements_api_and_every_write_is_followed(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    async with placement.seeder() as s:
        agg = str(uuidlib.uuid4())
        cns = await s.compute_nodes(6, prefix="load", traits=["CUSTOM_A"], aggregates=[agg])
        await s.provider("load-gpu", parent=cns[0], inventories={"CUSTOM_GPU": 4})
        mirror = make_mirror(ro_role)
        await mirror.start()
        try:
            assert mirror.state is not None
            assert mirror_view(mirror.state) == await api_view(s)
            assert mirror.health()["serving"] is True and mirror.health()["load_ms"] > 0

            # Every kind of write through the API; the background refresh follows each.
            gen = (await s.call("GET", f"/resource_providers/{cns[1]}"))[1]["generation"]
            inv = {"VCPU": {"total": 64, "reserved": 4, "allocation_ratio": 2.0, "step_size": 2}}
            status, _ = await s.call(
                "PUT",
                f"/resource_providers/{cns[1]}/inventories",
                {"resource_provider_generation": gen, "inventories": inv},
            )
            assert status == 200
            await s.call("PUT", "/traits/CUSTOM_B")
            gen = (await s.call("GET", f"/resource_providers/{cns[2]}"))[1]["generation"]
            await s.call(
                "PUT",
                f"/resource_providers/{cns[2]}/traits",
                {"resource_provider_generation": gen, "traits": ["CUSTOM_B"]},
            )
            gen = (await s.call("GET", f"/resource_providers/{cns[3]}"))[1]["generation"]
            await s.call(
                "PUT",
                f"/resource_providers/{cns[3]}/aggregates",
                {"resource_provider_generation": gen, "aggregates": []},
            )
            consumer = str(uuidlib.uuid4())
            assert await put_alloc(s, consumer, cns[4], {"VCPU": 3, "MEMORY_MB": 512}) == 204
            new = await s.compute_node("load-new")
            status, _ = await s.call("DELETE", f"/resource_providers/{cns[5]}")
            assert status == 204
            want = await api_view(s)
            await wait_for(lambda: mirror.state is not None and mirror_view(mirror.state) == want)
            assert new in mirror.state.by_uuid and cns[5] not in mirror.state.by_uuid

            # DELETE /allocations moves no generation: usage is followed on its own.
            gen_before = mirror.state.providers[mirror.state.by_uuid[cns[4]]].generation
            status, _ = await s.call("DELETE", f"/allocations/{consumer}")
            assert status == 204
            want = await api_view(s)
            assert want[cns[4]]["generation"] == gen_before and want[cns[4]]["usages"] == {}
            await wait_for(lambda: mirror_view(mirror.state)[cns[4]]["usages"] == {})
            assert mirror_view(mirror.state) == want
            assert mirror.health()["refresh_failures"] == 0
        finally:
            await mirror.close()


async def test_refused_claim_refreshes_at_once_and_the_host_leaves_the_candidates(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    async with placement.seeder() as s:
        full, spare = await s.compute_nodes(2, prefix="refuse", vcpus=4, cpu_allocation_ratio=1.0)
        mirror = make_mirror(ro_role, interval=3600)  # no background refresh during the test
        await mirror.start()
        async with PlacementClient(placement.options) as client:
            source = CandidateSource(client, mirror)
            try:
                # Someone else fills `full` behind the mirror's back.
                assert await put_alloc(s, str(uuidlib.uuid4()), full, {"VCPU": 4}) == 204
                req = vcpu_request(2, in_tree=None)
                cands = await source.get_allocation_candidates(req)
                assert source.paths == {"mirror": 1}
                assert {full, spare} <= set(cands.alloc_reqs_by_rp_uuid)  # stale view
                ar = cands.alloc_reqs_by_rp_uuid[full][0]
                ok = await source.claim(str(uuidlib.uuid4()), ar, project_id="p", user_id="u")
                assert ok is False  # Placement judged it: no capacity
                assert mirror.health()["on_demand_refreshes"] == 1
                await wait_for(lambda: mirror.health()["refreshes"] >= 2)
                cands = await source.get_allocation_candidates(req)
                assert full not in cands.alloc_reqs_by_rp_uuid
                assert spare in cands.alloc_reqs_by_rp_uuid
                # An accepted claim is subtracted before any refresh shows it.
                ar = cands.alloc_reqs_by_rp_uuid[spare][0]
                assert await source.claim(str(uuidlib.uuid4()), ar, project_id="p", user_id="u")
                cands = await source.get_allocation_candidates(vcpu_request(3))
                assert spare not in cands.alloc_reqs_by_rp_uuid
                assert cands.provider_summaries.get(spare) is None
            finally:
                await mirror.close()


async def test_a_retry_after_a_refusal_waits_for_the_refresh_and_passes_hosts_taken(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    """Another scheduler filled two hosts behind the mirror's back. Our claim on the first is
    refused; before the instance is placed again the retry waits for the refresh the refusal
    asked for (no background refresh here), and on that view the second host, the one a stale
    retry would have walked on to, no longer fits; the free one does, less our own claims the
    refreshed view does not show yet."""
    async with placement.seeder() as s:
        a, b, c = await s.compute_nodes(3, prefix="retry", vcpus=4, cpu_allocation_ratio=1.0)
        mirror = make_mirror(ro_role, interval=3600)
        await mirror.start()
        async with PlacementClient(placement.options) as client:
            source = CandidateSource(client, mirror)
            try:
                for rp in (a, b):  # the other scheduler's claims
                    assert await put_alloc(s, str(uuidlib.uuid4()), rp, {"VCPU": 4}) == 204
                cands = await source.get_allocation_candidates(vcpu_request(2, in_tree=None))
                ar = {rp: cands.alloc_reqs_by_rp_uuid[rp][0] for rp in (a, b, c)}  # stale
                refused = str(uuidlib.uuid4())
                assert await source.claim(refused, ar[a], project_id="p", user_id="u") is False
                assert await source.after_refusal(str(uuidlib.uuid4())) is None  # not refused
                fits = await source.after_refusal(refused)
                assert fits is not None
                assert (source.refusal_waits, source.refusal_timeouts) == (1, 0)
                assert mirror.health()["refreshes"] >= 2  # the refresh the refusal asked for
                assert not fits(ar[a]) and not fits(ar[b])
                assert fits(ar[c])
                assert await source.claim(str(uuidlib.uuid4()), ar[c], project_id="p", user_id="u")
                assert fits(ar[c])  # 2 of 4 VCPUs ours, not yet in the view
                assert await source.claim(str(uuidlib.uuid4()), ar[c], project_id="p", user_id="u")
                assert not fits(ar[c])
                assert await source.after_refusal(refused) is None  # asked once, answered once
            finally:
                await mirror.close()


async def test_a_provider_over_capacity_is_logged_and_counted_whoever_claimed_it(
    placement: PlacementServer, ro_role: ReadOnlyRole, caplog: pytest.LogCaptureFixture
) -> None:
    """No claim of ours: another client fills a host, then its inventory is lowered under the
    allocations (Placement allows that, as it let two schedulers' claims through)."""
    async with placement.seeder() as s:
        (rp,) = await s.compute_nodes(1, prefix="overcap", vcpus=4, cpu_allocation_ratio=1.0)
        assert await put_alloc(s, str(uuidlib.uuid4()), rp, {"VCPU": 3}) == 204
        mirror = make_mirror(ro_role, interval=3600)
        await mirror.start()
        try:
            assert mirror.health()["providers_over_capacity"] == 0

            async def set_vcpus(total: int) -> None:
                status, inv = await s.call("GET", f"/resource_providers/{rp}/inventories")
                assert status == 200
                inv["inventories"]["VCPU"]["total"] = total
                status, body = await s.call("PUT", f"/resource_providers/{rp}/inventories", inv)
                assert status == 200, body

            with caplog.at_level("WARNING", logger="asyncsched.state.placement_mirror"):
                await set_vcpus(2)
                await mirror.refresh()
            h = mirror.health()
            assert (h["providers_over_capacity"], h["over_capacity_found"]) == (1, 1)
            assert f"provider {rp} (overcap-" in caplog.text
            assert "is over capacity: VCPU 3 of 2" in caplog.text
            await mirror.refresh()  # still over: counted once
            assert mirror.health()["over_capacity_found"] == 1
            await set_vcpus(4)
            await mirror.refresh()
            h = mirror.health()
            assert (h["providers_over_capacity"], h["over_capacity_found"]) == (0, 1)
        finally:
            await mirror.close()


async def test_database_outage_serves_from_the_mirror_while_young_then_asks_placement(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    async with placement.seeder() as s:
        await s.compute_nodes(3, prefix="outage")
    mirror = make_mirror(ro_role, interval=0.2, max_age=2.0)
    await mirror.start()
    async with PlacementClient(placement.options) as client:
        source = CandidateSource(client, mirror)
        try:
            before = normalised(await source.get_allocation_candidates(vcpu_request()))
            ro_role.block()
            await wait_for(lambda: mirror.health()["refresh_failures"] > 0)
            assert mirror.health()["serving"] is True  # younger than max_age
            assert normalised(await source.get_allocation_candidates(vcpu_request())) == before
            assert source.paths == {"mirror": 2}
            await wait_for(lambda: not mirror.health()["serving"], timeout=6)
            assert source.health()["source"] == "placement"

            def why() -> str:
                return str(source.health()["why_not_mirror"])

            # PostgreSQL names the role; MariaDB says the account is locked, once the mirror's
            # next refresh reconnects (the first error may be the killed session's "MySQL
            # server has gone away", which a loaded machine can leave as the last one for a
            # while): wait for the cause, however long the refreshes take.
            await wait_for(lambda: "mirror_ro_" in why() or "account is locked" in why(), 60)
            assert "old" in why()
            got = await source.get_allocation_candidates(vcpu_request())
            assert source.paths["placement"] == 1
            assert normalised(got)[0] == before[0]  # Placement's own answer, same hosts
            ro_role.unblock()
            await wait_for(lambda: mirror.health()["serving"], timeout=15)
            await source.get_allocation_candidates(vcpu_request())
            assert source.paths["mirror"] == 3 and mirror.health()["last_error"] is None
        finally:
            ro_role.unblock()
            await mirror.close()


async def test_unreachable_database_at_start_does_not_stop_the_service(
    placement: PlacementServer,
) -> None:
    mirror = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement", interval=0.2, max_age=5, query_timeout=2
    )
    await mirror.start()  # logs, serves nothing, keeps trying
    async with PlacementClient(placement.options) as client:
        source = CandidateSource(client, mirror)
        try:
            await source.get_allocation_candidates(vcpu_request())
            assert source.paths == {"placement": 1}
            assert "mirror not loaded" in source.health()["why_not_mirror"]
        finally:
            await mirror.close()


async def test_identical_concurrent_fallback_requests_share_one_get(
    placement: PlacementServer,
) -> None:
    async with placement.seeder() as s:
        await s.compute_nodes(4, prefix="flight")
    options = PlacementOptions(auth_type="none", endpoint_override=placement.url, timeout=30)
    async with PlacementClient(options) as client:
        source = CandidateSource(client, None)
        granular = ResourceRequest(
            groups=(
                RequestGroup(use_same_provider=False, resources={"VCPU": 1}),
                RequestGroup(use_same_provider=True, resources={"MEMORY_MB": 64}, requester_id="1"),
            ),
            group_policy="none",
        )
        calls = client.health()["calls"]
        got = await asyncio.gather(*(source.get_allocation_candidates(granular) for _ in range(12)))
        assert client.health()["calls"] == calls + 1
        assert len(got[0].alloc_reqs_by_rp_uuid) >= 4 and all(g is got[0] for g in got)
        assert source.health()["get_shared"] == 11
