"""PlacementClient, query builder and pre-filters against the real Placement service."""

from __future__ import annotations

import asyncio
import time
import uuid as uuidlib
from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from asyncsched.conf.options import Config, PlacementOptions
from asyncsched.exceptions import AllocationUpdateFailed
from asyncsched.objects.models import (
    Aggregate,
    Flavor,
    ImageMeta,
    ImageMetaProps,
    RequestContext,
    RequestGroup,
    RequestSpec,
)
from asyncsched.placement.claims import ClaimBatch
from asyncsched.placement.client import Candidates, PlacementClient, PlacementHTTPError
from asyncsched.placement.prefilters import run_prefilters
from asyncsched.placement.query import build_resource_request
from tests.support.placement_server import PlacementServer

pytestmark = pytest.mark.integration
CTX = RequestContext(user_id="u", project_id="p")


def tag() -> str:
    return "CUSTOM_T_" + uuidlib.uuid4().hex[:10].upper()


def flavor(
    vcpus: int = 2,
    memory_mb: int = 2048,
    root_gb: int = 20,
    swap: int = 0,
    ephemeral_gb: int = 0,
    **extra: str,
) -> Flavor:
    return Flavor(
        vcpus=vcpus,
        memory_mb=memory_mb,
        root_gb=root_gb,
        swap=swap,
        ephemeral_gb=ephemeral_gb,
        extra_specs=extra,
    )


@pytest.fixture
async def client(placement_server: PlacementServer) -> AsyncIterator[PlacementClient]:
    async with PlacementClient(placement_server.options, claim_backoff=0.05) as c:
        yield c


async def candidates_for(
    client: PlacementClient,
    spec: RequestSpec,
    aggregates: tuple[Aggregate, ...] = (),
    config: Config | None = None,
    *,
    pin: bool = True,
) -> Candidates:
    config = config or Config()
    spec = run_prefilters(CTX, spec, config, aggregates)
    rr = build_resource_request(spec, config, enable_pinning_translate=pin)
    return await client.get_allocation_candidates(rr)


async def test_negotiates_version_and_reports_health(client: PlacementClient) -> None:
    assert client.max_version is not None and client.supports("1.36")
    health = client.health()
    assert health["started"] and health["errors"] == 0


async def test_candidates_honour_prefilters_on_seeded_providers(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = tag()
    agg_a, agg_b = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    async with placement_server.seeder() as s:
        in_a = [await s.compute_node(f"a{i}-{t}", traits=[t], aggregates=[agg_a]) for i in range(3)]
        in_b = await s.compute_node(f"b-{t}", traits=[t], aggregates=[agg_b])
        disabled = await s.compute_node(
            f"dis-{t}", traits=[t, "COMPUTE_STATUS_DISABLED"], aggregates=[agg_a]
        )
        small = await s.compute_node(f"small-{t}", traits=[t], aggregates=[agg_a], memory_mb=1024)
        not_nova = await s.provider(
            f"cyborg-{t}",
            inventories={"VCPU": 64, "MEMORY_MB": 65536, "DISK_GB": 1000},
            traits=[t],
            aggregates=[agg_a],
        )
    aggs = (Aggregate(1, agg_a, "a", metadata={"availability_zone": "az-a"}),)
    base = flavor(**{f"trait:{t}": "required"})
    everything = await candidates_for(client, RequestSpec(flavor=base), aggs)
    assert set(everything.provider_summaries) == {*in_a, in_b}
    assert disabled not in everything.provider_summaries  # !COMPUTE_STATUS_DISABLED
    assert not_nova not in everything.provider_summaries  # OWNER_NOVA
    assert small not in everything.provider_summaries  # does not fit
    in_az = await candidates_for(client, RequestSpec(flavor=base, availability_zone="az-a"), aggs)
    assert set(in_az.provider_summaries) == set(in_a)
    for rp in in_a:
        (ar,) = in_az.alloc_reqs_by_rp_uuid[rp]
        assert ar["allocations"][rp]["resources"] == {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 20}


async def test_nested_provider_candidates_are_indexed_by_child(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = tag()
    async with placement_server.seeder() as s:
        root = await s.compute_node(f"gpu-host-{t}", traits=[t])
        gpus = [
            await s.provider(f"gpu{i}-{t}", parent=root, inventories={"VGPU": 4}) for i in range(2)
        ]
    spec = RequestSpec(flavor=flavor(**{f"trait:{t}": "required", "resources1:VGPU": "1"}))
    c = await candidates_for(client, spec)
    assert len(c.allocation_requests) == 2
    assert set(c.alloc_reqs_by_rp_uuid) == {root, *gpus}
    assert len(c.alloc_reqs_by_rp_uuid[root]) == 2
    for gpu in gpus:
        (ar,) = c.alloc_reqs_by_rp_uuid[gpu]
        assert ar["mappings"]["1"] == [gpu]
        assert ar["allocations"][gpu]["resources"] == {"VGPU": 1}
    # the claim of a nested candidate lands on both providers
    consumer = str(uuidlib.uuid4())
    assert await client.claim(
        consumer, c.alloc_reqs_by_rp_uuid[gpus[0]][0], project_id="p", user_id="u"
    )
    async with placement_server.seeder() as s:
        assert (await s.usages(gpus[0]))["VGPU"] == 1
        assert (await s.usages(root))["VCPU"] == 2
    await client.rollback([consumer])


async def test_pcpu_query_and_vcpu_fallback(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = tag()
    async with placement_server.seeder() as s:
        pinned = await s.compute_node(f"pcpu-{t}", traits=[t], vcpus=0, pcpus=8)
        shared = await s.compute_node(f"vcpu-{t}", traits=[t])
    spec = RequestSpec(flavor=flavor(**{f"trait:{t}": "required", "hw:cpu_policy": "dedicated"}))
    pcpu = await candidates_for(client, spec)
    vcpu = await candidates_for(client, spec, pin=False)
    assert set(pcpu.provider_summaries) == {pinned}
    assert set(vcpu.provider_summaries) == {shared}
    merged = pcpu.merge(vcpu)
    assert set(merged.alloc_reqs_by_rp_uuid) == {pinned, shared}


@pytest.mark.parametrize(
    "extra",
    [
        {"resources1:VGPU": "1", "resources2:VGPU": "1", "group_policy": "isolate"},
        {
            "hw:cpu_policy": "mixed",
            "hw:cpu_dedicated_mask": "^0",
            "hw:cpu_thread_policy": "require",
        },
        {"hw:mem_encryption": "true", "hw:tpm_version": "2.0", "os:secure_boot": "required"},
        {"trait:CUSTOM_NOT_THERE_AT_ALL": "forbidden", "resources:CUSTOM_NOPE_RC": "0"},
        {"hw:pmem": "SMALL", "hw:pci_numa_affinity_policy": "socket"},
    ],
)
async def test_every_query_form_is_accepted_by_placement(
    placement_server: PlacementServer, client: PlacementClient, extra: dict[str, str]
) -> None:
    async with placement_server.seeder() as s:  # custom names must exist in Placement
        await s.ensure_traits(["CUSTOM_PHYSNET_X", "CUSTOM_NOT_THERE_AT_ALL"])
        await s.ensure_resource_classes(["CUSTOM_PMEM_NAMESPACE_SMALL", "CUSTOM_NOPE_RC"])
    props = ImageMetaProps(
        traits_required=frozenset({"HW_CPU_X86_AVX2"}),
        hw_disk_bus="virtio",
        hw_architecture="x86_64",
    )
    port = RequestGroup(
        requester_id=str(uuidlib.uuid4()),
        resources={"NET_BW_EGR_KILOBIT_PER_SEC": 1000},
        required_traits=frozenset({"CUSTOM_PHYSNET_X"}),
    )
    spec = RequestSpec(
        flavor=flavor(vcpus=4, swap=512, ephemeral_gb=1, **extra),
        image=ImageMeta(disk_format="qcow2", properties=props),
        requested_resources=(port,),
        availability_zone="az-x",
        project_id="p",
        scheduler_hints={"group": ("g",)},
    )
    cfg = Config()
    aggs = (Aggregate(1, str(uuidlib.uuid4()), "x", metadata={"availability_zone": "az-x"}),)
    # Placement answers 200 (an empty list here): the query is well-formed for it.
    result = await candidates_for(client, spec, aggs, cfg)
    assert result.allocation_requests == []


async def test_unknown_custom_resource_class_is_a_clear_400(client: PlacementClient) -> None:
    spec = RequestSpec(flavor=flavor(**{"resources:CUSTOM_NEVER_DEFINED_X": "1"}))
    with pytest.raises(PlacementHTTPError, match="No such resource class CUSTOM_NEVER_DEFINED_X"):
        await candidates_for(client, spec)


async def test_claim_is_visible_and_rollback_leaves_nothing(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = tag()
    async with placement_server.seeder() as s:
        rps = await s.compute_nodes(3, prefix=f"claim-{t}", traits=[t])
    c = await candidates_for(client, RequestSpec(flavor=flavor(**{f"trait:{t}": "required"})))
    consumers = [str(uuidlib.uuid4()) for _ in range(3)]
    for consumer, rp in zip(consumers, rps, strict=True):
        assert await client.claim(
            consumer, c.alloc_reqs_by_rp_uuid[rp][0], project_id="proj", user_id="user"
        )
    async with placement_server.seeder() as s:
        got = await s.allocations(consumers[0])
        assert got["project_id"] == "proj" and got["user_id"] == "user"
        assert got["allocations"][rps[0]]["resources"] == {
            "VCPU": 2,
            "MEMORY_MB": 2048,
            "DISK_GB": 20,
        }
        assert (await s.usages(rps[1]))["MEMORY_MB"] == 2048
    # the same claim again (a resent PUT) is recognised as ours; a different one for the same
    # new consumer is nova's consumer-generation conflict
    ar0 = c.alloc_reqs_by_rp_uuid[rps[0]][0]
    assert await client.claim(consumers[0], ar0, project_id="proj", user_id="user")
    with pytest.raises(AllocationUpdateFailed):
        await client.claim(
            consumers[0], c.alloc_reqs_by_rp_uuid[rps[2]][0], project_id="proj", user_id="user"
        )
    await client.rollback([*consumers, str(uuidlib.uuid4())])  # unknown consumer: 404 is fine
    async with placement_server.seeder() as s:
        for consumer in consumers:
            assert (await s.allocations(consumer))["allocations"] == {}
        for rp in rps:
            assert all(v == 0 for v in (await s.usages(rp)).values())


async def test_move_claim_doubles_up_source_and_destination(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = tag()
    async with placement_server.seeder() as s:
        src, dst = await s.compute_nodes(2, prefix=f"move-{t}", traits=[t])
    c = await candidates_for(client, RequestSpec(flavor=flavor(**{f"trait:{t}": "required"})))
    consumer = str(uuidlib.uuid4())
    assert await client.claim(
        consumer, c.alloc_reqs_by_rp_uuid[src][0], project_id="p", user_id="u"
    )
    assert await client.claim(
        consumer,
        c.alloc_reqs_by_rp_uuid[dst][0],
        project_id="p",
        user_id="u",
        may_have_allocations=True,
    )
    async with placement_server.seeder() as s:
        assert set((await s.allocations(consumer))["allocations"]) == {src, dst}
    await client.rollback([consumer])


async def test_concurrent_claims_report_exactly_what_placement_holds(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    """20 racing claims for 10 VCPUs: capacity is used up, and True <=> an allocation exists."""
    t = tag()
    async with placement_server.seeder() as s:
        rp = await s.compute_node(f"tight-{t}", traits=[t], vcpus=10, cpu_allocation_ratio=1.0)
    ar = {"allocations": {rp: {"resources": {"VCPU": 1}}}}
    consumers = [str(uuidlib.uuid4()) for _ in range(20)]
    results = await asyncio.gather(
        *(client.claim(u, ar, project_id="p", user_id="u") for u in consumers)
    )
    assert results.count(True) >= 10  # no claim lost to a race the client should retry
    async with placement_server.seeder() as s:
        assert (await s.usages(rp))["VCPU"] == results.count(True)
        for consumer, ok in zip(consumers, results, strict=True):
            assert bool((await s.allocations(consumer))["allocations"]) == ok
    await client.rollback([u for u, ok in zip(consumers, results, strict=True) if ok])


async def test_claim_batch_multi_create_and_rollback(
    placement_server: PlacementServer, client: PlacementClient
) -> None:
    t = tag()
    async with placement_server.seeder() as s:
        rps = await s.compute_nodes(4, prefix=f"batch-{t}", traits=[t])
    c = await candidates_for(client, RequestSpec(flavor=flavor(**{f"trait:{t}": "required"})))
    consumers = [str(uuidlib.uuid4()) for _ in range(10)]
    batch = ClaimBatch(client, concurrency=4, project_id="p", user_id="u")
    for i, consumer in enumerate(consumers):
        batch.submit(consumer, c.alloc_reqs_by_rp_uuid[rps[i % 4]][0])
    results = await batch.wait()
    assert all(r.ok for r in results.values()) and sorted(batch.claimed) == sorted(consumers)
    async with placement_server.seeder() as s:
        assert sum([(await s.usages(rp))["VCPU"] for rp in rps]) == 20
    await batch.rollback()
    async with placement_server.seeder() as s:
        assert sum([(await s.usages(rp))["VCPU"] for rp in rps]) == 0


async def test_keystone_token_flow_to_real_placement(
    placement_server: PlacementServer,
) -> None:
    """A small keystone stand-in issues the token and the catalog; Placement is the real one."""
    issued: list[float] = []

    async def tokens(request: web.Request) -> web.Response:
        body = await request.json()
        assert body["auth"]["identity"]["password"]["user"]["password"] == "pw"
        issued.append(time.time())
        expires = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        catalog = [
            {
                "type": "placement",
                "endpoints": [
                    {"interface": "internal", "region_id": "RegionOne", "url": placement_server.url}
                ],
            }
        ]
        # noauth2 Placement treats the token 'admin' as an admin user.
        return web.json_response(
            {"token": {"expires_at": expires, "catalog": catalog}},
            status=201,
            headers={"X-Subject-Token": "admin"},
        )

    app = web.Application()
    app.router.add_post("/identity/v3/auth/tokens", tokens)
    keystone = TestServer(app, host="127.0.0.1")
    await keystone.start_server()
    try:
        opts = PlacementOptions(
            auth_type="password",
            auth_url=str(keystone.make_url("/identity/v3")),
            username="nova",
            password="pw",
            project_name="service",
            region_name="RegionOne",
        )
        async with PlacementClient(opts) as c:
            assert c.endpoint == placement_server.url
            result = await c.get_allocation_candidates(
                build_resource_request(RequestSpec(flavor=flavor(vcpus=10_000)), Config())
            )
            assert result.allocation_requests == []
        assert len(issued) == 1
    finally:
        await keystone.close()
