"""CandidateSource: path choice and counts, the single-flight GET, what claims teach the mirror;
PlacementMirror's age rule and its memory of this process's claims (no database needed)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from asyncsched.conf.loader import load_string
from asyncsched.exceptions import ConfigError
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import CandidateSource, SingleFlight
from asyncsched.state.placement_mirror import MirrorState, PlacementMirror
from asyncsched.state.placement_mirror.reader import Names, RefreshResult
from tests.support.mirror_data import Cloud, request


class FakeClient:
    """Placement's client: answers GETs slowly (so calls overlap), records claims."""

    def __init__(self, claim_ok: bool = True) -> None:
        self.gets: list[str] = []
        self.claims: list[str] = []
        self.rolled_back: list[str] = []
        self.claim_ok = claim_ok
        self.fail_get: Exception | None = None

    async def get_allocation_candidates(self, req: ResourceRequest) -> Candidates:
        self.gets.append(req.to_querystring())
        await asyncio.sleep(0.05)
        if self.fail_get is not None:
            raise self.fail_get
        return Candidates.empty()

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
        self.claims.append(consumer_uuid)
        return self.claim_ok

    async def rollback(self, consumer_uuids: Iterable[str]) -> None:
        self.rolled_back.extend(consumer_uuids)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def mirror_with(state: MirrorState | None, clock: Clock, max_age: float = 30.0) -> PlacementMirror:
    m = PlacementMirror(
        "postgresql://root@127.0.0.1:1/placement",
        interval=0.5,
        max_age=max_age,
        query_timeout=1,
        clock=clock,
    )
    if state is not None:
        m._apply(RefreshResult(state, Names({}, {}), len(state.providers), 0), clock(), 1.0)
    return m


def small_cloud() -> MirrorState:
    c = Cloud()
    c.compute("a", vcpu=4)
    c.compute("b", vcpu=4)
    return c.state()


async def test_mirror_path_when_serving_and_placement_for_other_shapes() -> None:
    client, clock = FakeClient(), Clock()
    src = CandidateSource(client, mirror_with(small_cloud(), clock))
    got = await src.get_allocation_candidates(request({"VCPU": 1}))
    assert set(got.alloc_reqs_by_rp_uuid) == {"a", "b"} and client.gets == []
    await src.get_allocation_candidates(request({}))  # resourceless: Placement
    assert len(client.gets) == 1
    assert src.paths == {"mirror": 1, "placement": 1}
    assert src.reasons == {"resourceless request group": 1}
    health = src.health()
    assert health["source"] == "mirror" and health["why_not_mirror"] is None
    assert health["last_path"] == "placement (resourceless request group)"


async def test_old_mirror_gives_way_to_placement_and_health_says_why() -> None:
    client, clock = FakeClient(), Clock()
    mirror = mirror_with(small_cloud(), clock, max_age=5.0)
    mirror._stats.last_error = "ConnectionRefusedError: refused"
    src = CandidateSource(client, mirror)
    clock.now += 4.0
    await src.get_allocation_candidates(request())
    assert src.paths == {"mirror": 1}  # younger than max_age: still serving
    clock.now += 2.0
    await src.get_allocation_candidates(request())
    assert src.paths == {"mirror": 1, "placement": 1}
    why = src.health()["why_not_mirror"]
    assert "6.0 s old" in why and "refused" in why
    assert mirror.health()["serving"] is False


async def test_no_mirror_or_never_loaded_uses_placement() -> None:
    client = FakeClient()
    src = CandidateSource(client, None)
    await src.get_allocation_candidates(request())
    assert src.paths == {"placement": 1}
    src = CandidateSource(client, mirror_with(None, Clock()))
    await src.get_allocation_candidates(request())
    assert "mirror not loaded" in next(iter(src.reasons))


async def test_identical_concurrent_gets_share_one_call() -> None:
    client = FakeClient()
    src = CandidateSource(client, None)
    same = [src.get_allocation_candidates(request({"VCPU": 1})) for _ in range(10)]
    other = src.get_allocation_candidates(request({"VCPU": 2}))
    results = await asyncio.gather(*same, other)
    assert len(client.gets) == 2
    assert all(r is results[0] for r in results[:10])
    assert src.health()["get_shared"] == 9
    await src.get_allocation_candidates(request({"VCPU": 1}))  # finished: a new call
    assert len(client.gets) == 3


async def test_single_flight_shares_errors_and_survives_a_cancelled_waiter() -> None:
    flight: SingleFlight[int] = SingleFlight()
    calls = 0

    async def slow() -> int:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return 7

    first = asyncio.ensure_future(flight.run("k", slow))
    second = asyncio.ensure_future(flight.run("k", slow))
    await asyncio.sleep(0.01)
    first.cancel()
    assert await second == 7 and calls == 1
    assert flight.in_flight == 0

    async def boom() -> int:
        await asyncio.sleep(0.01)
        raise RuntimeError("placement down")

    got = await asyncio.gather(flight.run("e", boom), flight.run("e", boom), return_exceptions=True)
    assert [str(e) for e in got] == ["placement down", "placement down"]
    assert flight.calls == 2


async def test_claims_teach_the_mirror() -> None:
    client, clock = FakeClient(), Clock()
    mirror = mirror_with(small_cloud(), clock)
    src = CandidateSource(client, mirror)
    ar = {"allocations": {"a": {"resources": {"VCPU": 3}}}}
    assert await src.claim("c1", ar, project_id="p", user_id="u")
    got = await src.get_allocation_candidates(request({"VCPU": 2}))
    assert set(got.alloc_reqs_by_rp_uuid) == {"b"}  # a's 3 VCPU claimed, not yet refreshed
    await src.rollback(["c1"])
    assert client.rolled_back == ["c1"]
    got = await src.get_allocation_candidates(request({"VCPU": 2}))
    assert set(got.alloc_reqs_by_rp_uuid) == {"a", "b"}

    client.claim_ok = False
    assert not await src.claim("c2", ar, project_id="p", user_id="u")
    assert mirror.health()["on_demand_refreshes"] == 1 and mirror.pending_usage() == {}


def test_a_refresh_that_began_after_a_claim_ends_its_pending_usage() -> None:
    clock = Clock()
    state = small_cloud()
    mirror = mirror_with(state, clock)
    mirror.note_claimed("c1", {"allocations": {"a": {"resources": {"VCPU": 1}}}})
    clock.now += 1
    mirror.note_claimed("c2", {"allocations": {"a": {"resources": {"VCPU": 2}}}})
    # a refresh whose snapshot began between the two claims saw c1 only
    mirror._apply(RefreshResult(state, Names({}, {}), 0, 0), clock.now - 0.5, 1.0)
    assert mirror.pending_usage() == {"a": {"VCPU": 2}}


def test_placement_database_option_as_placement_conf_spells_it() -> None:
    conf = load_string(
        "[placement_database]\nconnection = postgresql+psycopg2://ro@db/placement\n"
        "max_pool_size = 10\n[api]\nauth_strategy = keystone\n"
    )
    assert conf.placement_database.connection == "postgresql://ro@db/placement"
    mirror = PlacementMirror.from_config(conf)
    assert mirror is not None and mirror.interval == 0.5
    off = load_string(
        "[placement_database]\nconnection = postgresql://ro@db/placement\n"
        "[asyncsched]\nplacement_mirror = false\n"
    )
    assert PlacementMirror.from_config(off) is None
    assert PlacementMirror.from_config(load_string("")) is None


def test_mysql_placement_database_builds_the_mirror_and_a_bad_one_is_refused_alike() -> None:
    """Placement's database on MySQL/MariaDB (issue #25): the mirror reads it in its dialect;
    a malformed URL gets the nova databases' error, the password masked."""
    from asyncsched.state.placement_mirror import PlacementMirror

    conf = load_string(
        "[placement_database]\nconnection = mysql+pymysql://p:secret@db/placement?charset=utf8\n"
    )
    mirror = PlacementMirror.from_config(conf)
    assert mirror is not None and mirror.url.dialect == "mysql"
    assert mirror.url.hosts == (("db", 3306),) and "secret" not in mirror.redacted


def test_a_bad_placement_database_url_gets_the_nova_databases_error() -> None:
    """Issue #25: MySQL URLs load for Placement's database as for nova's; a bad one is
    refused with the same reason, its password masked."""
    url = "mysql+pymysql://p:secret@db/placement?charset=utf8"
    conf = load_string(f"[placement_database]\nconnection = {url}\n")
    assert conf.placement_database.connection == url
    with pytest.raises(ConfigError) as placement_err:
        load_string("[placement_database]\nconnection = mysql+pymysql://p:secret@db:x/placement\n")
    with pytest.raises(ConfigError) as api_err:
        load_string("[api_database]\nconnection = mysql+pymysql://p:secret@db:x/nova_api\n")
    assert "port is not a number" in str(placement_err.value)
    assert (
        str(placement_err.value).split(": invalid value")[1]
        == str(api_err.value).split(": invalid value")[1]
    )
    assert "secret" not in str(placement_err.value)


def test_daemon_with_a_placement_database_starts_the_mirror_before_the_scheduler() -> None:
    from asyncsched.app import build_daemon
    from asyncsched.service import component_name

    conf = load_string(
        "[api_database]\nconnection = postgresql://root@127.0.0.1/nova_api\n"
        "[placement]\nauth_type = none\nendpoint_override = http://127.0.0.1:1\n"
        "[placement_database]\nconnection = postgresql://root@127.0.0.1/placement\n"
    )
    daemon = build_daemon(conf)
    names = [component_name(c) for c in daemon.components]
    assert names == [
        "looplag",
        "hoststate",
        "placement",
        "placement_mirror",
        "candidates",
        "scheduler",
        "rpc",
    ]
    assert daemon.manager.placement is daemon.candidates
    assert daemon.candidates is not None and daemon.candidates.mirror is daemon.mirror


@pytest.mark.parametrize(("services_judge", "offered"), [(True, {"a", "b"}), (False, {"b"})])
async def test_the_disabled_trait_is_left_to_the_services_read_when_it_judges(
    services_judge: bool, offered: set[str]
) -> None:
    """nova's compute clears COMPUTE_STATUS_DISABLED in Placement before the API answers an
    enable; the mirror sees that a refresh later. With ComputeFilter on, the services table
    read for the request decides, so the mirror does not refuse the host on its stale trait."""
    c = Cloud()
    c.compute("a", vcpu=4, traits=("COMPUTE_STATUS_DISABLED",))
    c.compute("b", vcpu=4)
    client = FakeClient()
    src = CandidateSource(client, mirror_with(c.state(), Clock()), services_judge=services_judge)
    got = await src.get_allocation_candidates(
        request({"VCPU": 1}, root_forbidden=["COMPUTE_STATUS_DISABLED"])
    )
    assert set(got.alloc_reqs_by_rp_uuid) == offered and client.gets == []
