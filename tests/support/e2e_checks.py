"""Assertions shared by the e2e modules: nova's Selection contract and Placement's bookkeeping."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from asyncsched.objects.models import Selection
from tests.support.cloud import Cloud, allocation_of
from tests.support.placement_server import PlacementServer


async def allocations(
    placement: PlacementServer, uuids: Iterable[str]
) -> dict[str, dict[str, Any]]:
    """GET /allocations/{uuid} for each instance, straight from Placement."""
    uuids = list(uuids)
    async with placement.seeder() as s:
        found = await asyncio.gather(*(s.allocations(u) for u in uuids))
    return dict(zip(uuids, found, strict=True))


async def assert_no_allocations(placement: PlacementServer, uuids: Iterable[str]) -> None:
    found = await allocations(placement, uuids)
    assert all(a["allocations"] == {} for a in found.values()), found


def check_selections(
    cloud: Cloud,
    sels: list[list[Selection]],
    uuids: Sequence[str],
    eligible: Iterable[str],
    *,
    az: str,
    max_attempts: int = 3,
) -> None:
    """Nova's contract for a boot: one list per instance, the claimed host first, then up to
    max_attempts-1 alternates from its cell that no instance of the request was given."""
    eligible = set(eligible)
    assert len(sels) == len(uuids)
    chosen = {s[0].service_host for s in sels}
    for per_instance in sels:
        first, alternates = per_instance[0], per_instance[1:]
        seeded = cloud.hosts[first.service_host]
        assert first.service_host in eligible
        assert first.nodename == first.service_host
        assert first.compute_node_uuid == seeded.uuid
        assert first.cell_uuid == seeded.cell_uuid
        assert first.availability_zone == az
        assert allocation_of(first)["allocations"].keys() == {seeded.uuid}
        assert first.allocation_request_version
        same_cell_left = {h for h in eligible if cloud.hosts[h].cell_uuid == seeded.cell_uuid}
        assert len(alternates) == min(max_attempts - 1, len(same_cell_left - chosen))
        assert len({a.service_host for a in alternates}) == len(alternates)
        for alt in alternates:
            alt_host = cloud.hosts[alt.service_host]
            assert alt.service_host in eligible and alt.service_host not in chosen
            assert alt.cell_uuid == seeded.cell_uuid == alt_host.cell_uuid
            assert alt.compute_node_uuid == alt_host.uuid
            assert allocation_of(alt)["allocations"].keys() == {alt_host.uuid}


async def check_allocations(
    placement: PlacementServer,
    sels: list[list[Selection]],
    uuids: Sequence[str],
    resources: Mapping[str, int],
) -> None:
    """Exactly one allocation per instance, on the selected host's provider, right amounts;
    alternates are not claimed."""
    found = await allocations(placement, uuids)
    for inst, per_instance in zip(uuids, sels, strict=True):
        allocs = found[inst]["allocations"]
        assert set(allocs) == {per_instance[0].compute_node_uuid}, (inst, allocs)
        assert allocs[per_instance[0].compute_node_uuid]["resources"] == dict(resources)
