"""Differential test: the mirror's candidates against the real ``GET /allocation_candidates``.

Random clouds (capacity near full, reserved, ratios, min/max_unit and step_size edges, traits,
COMPUTE_STATUS_DISABLED, aggregates) and random requests (required/forbidden traits, member_of
and forbidden aggregates, in_tree, root_required/root_forbidden). Every answer the mirror
gives must equal Placement's (no limit): same allocation requests, same provider summaries.
Then nested and sharing providers join (requests for their classes must fall back; the others
must still agree, now on Placement's tree path), and random writes through Placement's API
(claims, deletes, inventory, trait and aggregate changes) must be agreed on after one refresh.

Seeds: ``ASYNCSCHED_DIFF_SEED`` (default 20261123); a failure prints the seed and request.
"""

from __future__ import annotations

import os
import random
import uuid as uuidlib
from collections import Counter
from typing import Any

import pytest

from asyncsched.objects.models import RequestGroup
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.errors import PlacementHTTPError
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import Fallback, LocalCandidates
from asyncsched.state.placement_mirror import PlacementMirror
from tests.support.mirror_role import ReadOnlyRole
from tests.support.mirror_views import api_view, mirror_view, normalised
from tests.support.placement_server import PlacementServer, Seeder

pytestmark = pytest.mark.asyncio(loop_scope="module")

SEED = int(os.environ.get("ASYNCSCHED_DIFF_SEED", "20261123"))
TRAITS = ["CUSTOM_T1", "CUSTOM_T2", "CUSTOM_T3", "COMPUTE_STATUS_DISABLED", "HW_CPU_X86_AVX2"]
AGGS = [str(uuidlib.UUID(int=i + 1)) for i in range(4)]
HOSTS = 36


def random_inventory(rng: random.Random) -> dict[str, dict[str, Any]]:
    vcpu = rng.choice([2, 4, 8, 16, 48])
    inv: dict[str, dict[str, Any]] = {
        "VCPU": {
            "total": vcpu,
            "reserved": rng.choice([0, 0, 1, 2]),
            "allocation_ratio": rng.choice([1.0, 1.5, 4.0, 16.0]),
            "max_unit": rng.choice([vcpu, max(1, vcpu // 2)]),
        },
        "MEMORY_MB": {
            "total": rng.choice([2048, 8192, 65536]),
            "reserved": rng.choice([0, 512]),
            "allocation_ratio": rng.choice([1.0, 1.5]),
        },
    }
    if rng.random() < 0.8:
        disk = rng.choice([20, 100, 1000])
        inv["DISK_GB"] = {
            "total": disk,
            "step_size": rng.choice([1, 1, 10]),
            "min_unit": rng.choice([1, 1, 5]),
            "max_unit": rng.choice([disk, disk // 2]),
        }
    if rng.random() < 0.2:
        inv["PCPU"] = {"total": rng.choice([4, 8])}
    return inv


async def seed_flat(s: Seeder, rng: random.Random) -> list[str]:
    await s.ensure_traits(TRAITS)
    hosts = []
    for i in range(HOSTS):
        traits = ["OWNER_NOVA", *rng.sample(TRAITS, rng.randint(0, 3))]
        aggs = rng.sample(AGGS, rng.randint(0, 2))
        hosts.append(
            await s.provider(
                f"diff-{i:03d}", inventories=random_inventory(rng), traits=traits, aggregates=aggs
            )
        )
    for _ in range(HOSTS):  # usage: some hosts near full (refused writes are fine)
        await claim(s, rng, rng.choice(hosts))
    return hosts


async def claim(s: Seeder, rng: random.Random, rp: str) -> str:
    consumer = str(uuidlib.uuid4())
    res = {"VCPU": rng.choice([1, 2, 4, 8, 16]), "MEMORY_MB": rng.choice([256, 1024, 4096])}
    if rng.random() < 0.5:
        res["DISK_GB"] = rng.choice([10, 20, 50])
    body = {
        "allocations": {rp: {"resources": res}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
    }
    await s.call("PUT", f"/allocations/{consumer}", body)
    return consumer


def random_request(rng: random.Random, hosts: list[str]) -> ResourceRequest:
    res: dict[str, int] = {
        "VCPU": rng.choice([1, 2, 3, 4, 8, 16, 24]),
        "MEMORY_MB": rng.choice([256, 1024, 4096, 16384]),
    }
    if rng.random() < 0.6:
        res["DISK_GB"] = rng.choice([1, 5, 10, 15, 20, 100, 600])
    if rng.random() < 0.1:
        res = {"PCPU": rng.choice([1, 4]), "MEMORY_MB": 512}
    traits = rng.sample(TRAITS, rng.randint(0, 3))
    cut = rng.randint(0, len(traits))
    required, forbidden = traits[:cut], traits[cut:]
    if rng.random() < 0.5:
        forbidden.append(
            "COMPUTE_STATUS_DISABLED"
        ) if "COMPUTE_STATUS_DISABLED" not in required else None
    member_of: list[tuple[str, ...]] = []
    if rng.random() < 0.35:
        member_of.append(tuple(sorted(rng.sample(AGGS, rng.randint(1, 2)))))
    if rng.random() < 0.1:
        member_of.append((rng.choice(AGGS),))
    not_in = frozenset(rng.sample(AGGS, 1)) if rng.random() < 0.2 else frozenset()
    not_in -= {a for any_of in member_of for a in any_of}
    in_tree = rng.choice(hosts) if rng.random() < 0.1 else None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    if rng.random() < 0.2:
        root_required = frozenset({rng.choice(TRAITS[:3])})
    elif rng.random() < 0.2:
        root_forbidden = frozenset({rng.choice(TRAITS[:3])})
    g = RequestGroup(
        use_same_provider=False,
        resources=res,
        required_traits=frozenset(required),
        forbidden_traits=frozenset(forbidden) - frozenset(required),
        aggregates=tuple(member_of),
        forbidden_aggregates=not_in,
        in_tree=in_tree,
    )
    return ResourceRequest(
        groups=(g,), limit=None, root_required=root_required, root_forbidden=root_forbidden
    )


async def compare(
    client: PlacementClient, mirror: PlacementMirror, requests: list[ResourceRequest]
) -> Counter[str]:
    """Every request both ways; returns how often each path was taken."""
    local = LocalCandidates()
    paths: Counter[str] = Counter()
    state, why = mirror.serving()
    assert state is not None, why
    for req in requests:
        mine = local.compute(state, req)
        if isinstance(mine, Fallback):
            paths[f"fallback: {mine.reason}"] += 1
            continue
        paths["mirror"] += 1
        try:
            theirs = await client.get_allocation_candidates(req)
        except PlacementHTTPError as exc:
            # Placement 16.0.0 on its tree path hands trait *names* to a trait-id query
            # (research_context.get_trees_matching_all passes the forbidden_traits dict):
            # HTTP 500. nova then gets NoValidHost; the mirror answers (README: differs).
            assert exc.status == 500 and "invalid input syntax for type integer" in str(exc)
            assert req.groups[0].forbidden_traits and mirror.state is not None
            assert mirror.state.has_trees
            paths["placement HTTP 500 (forbidden traits on its tree path)"] += 1
            continue
        a, b = normalised(mine), normalised(theirs)
        assert a == b, (
            f"seed {SEED}: {req.to_querystring()}: allocation requests only mirror "
            f"{sorted(a[0] - b[0])}, only Placement {sorted(b[0] - a[0])}; summaries only "
            f"mirror {sorted(set(a[1]) - set(b[1]))}, "
            f"only Placement {sorted(set(b[1]) - set(a[1]))}"
            f", differing {[u for u in a[1] if u in b[1] and a[1][u] != b[1][u]]}"
        )
        if theirs.allocation_requests:
            paths["mirror, non-empty"] += 1
    return paths


async def test_mirror_candidates_equal_placements(
    placement: PlacementServer, ro_role: ReadOnlyRole
) -> None:
    rng = random.Random(SEED)
    async with placement.seeder() as s, PlacementClient(placement.options) as client:
        hosts = await seed_flat(s, rng)
        mirror = PlacementMirror(ro_role.url, interval=3600, max_age=1e6, query_timeout=10)
        await mirror.start()
        try:
            # 1. flat cloud: Placement's single-provider path; the mirror answers everything.
            paths = await compare(client, mirror, [random_request(rng, hosts) for _ in range(70)])
            assert paths["mirror"] == 70, paths
            print("phase 1 (flat):", dict(paths))
            assert 15 <= paths["mirror, non-empty"] < 70, paths  # the requests do discriminate

            # 2. nested and sharing providers exist: Placement takes its tree path.
            gpu_host = hosts[0]
            await s.provider("diff-gpu", parent=gpu_host, inventories={"CUSTOM_GPU": 2})
            await s.provider("diff-numa", parent=hosts[1], inventories={"PCPU": 8})
            await s.provider(
                "diff-nfs",
                inventories={"DISK_GB": 5000},
                traits=["MISC_SHARES_VIA_AGGREGATE"],
                aggregates=[AGGS[0]],
            )
            await mirror.refresh()
            assert mirror_view(mirror.state) == await api_view(s)  # type: ignore[arg-type]
            reqs = [random_request(rng, hosts) for _ in range(50)]
            paths = await compare(client, mirror, reqs)
            for req in reqs:  # classes on a child or a sharing provider: Placement decides
                rcs = set(req.groups[0].resources)
                got = LocalCandidates().compute(mirror.state, req)  # type: ignore[arg-type]
                assert isinstance(got, Fallback) == bool(rcs & {"DISK_GB", "PCPU"})
            print("phase 2 (nested + sharing):", dict(paths))
            assert not any(
                k.startswith("fallback") and not ("sharing" in k or "nested" in k) for k in paths
            ), paths
            assert paths["mirror"] >= 10 and paths["mirror, non-empty"] >= 5, paths
            gpu = ResourceRequest(
                groups=(
                    RequestGroup(use_same_provider=False, resources={"VCPU": 1, "CUSTOM_GPU": 1}),
                ),
                limit=None,
            )
            assert isinstance(LocalCandidates().compute(mirror.state, gpu), Fallback)  # type: ignore[arg-type]

            # 3. random writes through Placement's API, then one refresh: agreement again.
            consumers: list[str] = []
            for _ in range(40):
                op = rng.random()
                rp = rng.choice(hosts)
                if op < 0.35:
                    consumers.append(await claim(s, rng, rp))
                elif op < 0.55 and consumers:
                    await s.call(
                        "DELETE", f"/allocations/{consumers.pop(rng.randrange(len(consumers)))}"
                    )
                elif op < 0.7:
                    gen = (await s.call("GET", f"/resource_providers/{rp}"))[1]["generation"]
                    await s.call(
                        "PUT",
                        f"/resource_providers/{rp}/inventories",
                        {"resource_provider_generation": gen, "inventories": random_inventory(rng)},
                    )
                elif op < 0.85:
                    gen = (await s.call("GET", f"/resource_providers/{rp}"))[1]["generation"]
                    traits = ["OWNER_NOVA", *rng.sample(TRAITS, rng.randint(0, 3))]
                    await s.call(
                        "PUT",
                        f"/resource_providers/{rp}/traits",
                        {"resource_provider_generation": gen, "traits": traits},
                    )
                else:
                    gen = (await s.call("GET", f"/resource_providers/{rp}"))[1]["generation"]
                    await s.call(
                        "PUT",
                        f"/resource_providers/{rp}/aggregates",
                        {
                            "resource_provider_generation": gen,
                            "aggregates": rng.sample(AGGS, rng.randint(0, 2)),
                        },
                    )
            await mirror.refresh()
            assert mirror_view(mirror.state) == await api_view(s)  # type: ignore[arg-type]
            paths = await compare(client, mirror, [random_request(rng, hosts) for _ in range(50)])
            assert paths["mirror"] >= 10, paths
            print("phase 3 (after random writes):", dict(paths))
        finally:
            await mirror.close()
