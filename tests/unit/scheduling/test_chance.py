"""The chance driver on its own: claims rolled back when a later instance finds no host, and
alternates from the chosen host's cell that are not chosen for another instance."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from asyncsched.exceptions import NoValidHost
from asyncsched.objects.models import Flavor, RequestContext, RequestSpec
from asyncsched.scheduling.chance import ChanceScheduler
from asyncsched.state.host_state import HostState
from tests.support.sched_fakes import FakeCache, FakePlacement
from tests.support.sched_helpers import NOW, config, host

CTX = RequestContext(request_id="req-chance", user_id="u", project_id="p")


class _OneClaimPlacement(FakePlacement):
    """Takes the first claim, refuses every later one."""

    async def claim(
        self, consumer_uuid: str, allocation_request: Mapping[str, Any], **kw: Any
    ) -> bool:
        if self.allocations:
            return False
        return await super().claim(consumer_uuid, allocation_request, **kw)


def _hosts(n: int) -> list[HostState]:
    return [host(f"cmp{i}", cell_uuid=f"cell{i % 2}") for i in range(n)]


def _spec(num: int) -> tuple[RequestSpec, list[str]]:
    flavor = Flavor(memory_mb=512, vcpus=1, root_gb=1, name="tiny")
    spec = RequestSpec(flavor=flavor, num_instances=num, project_id="p", user_id="u")
    return spec, [str(uuid.uuid4()) for _ in range(num)]


async def test_claims_of_earlier_instances_are_rolled_back() -> None:
    hosts = _hosts(4)
    placement = _OneClaimPlacement(hosts)
    sched = ChanceScheduler(config(), FakeCache(hosts, []), placement, clock=lambda: NOW)
    spec, uuids = _spec(3)
    with pytest.raises(NoValidHost):
        await sched.select_destinations(CTX, spec, uuids, True, True)
    assert placement.claims and placement.claims[0][0] == uuids[0]
    assert placement.allocations == {}  # the first instance's claim was given back


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_alternates_come_from_the_same_cell_and_are_not_chosen(seed: int) -> None:
    hosts = _hosts(8)
    placement = FakePlacement(hosts)
    rng = random.Random(seed)
    sched = ChanceScheduler(config(), FakeCache(hosts, []), placement, rng=rng, clock=lambda: NOW)
    spec, uuids = _spec(2)
    rows = await sched.select_destinations(CTX, spec, uuids, True, True)
    chosen = {row[0].service_host for row in rows}
    for row, instance in zip(rows, uuids, strict=True):
        first, *alts = row
        assert len(alts) == config().scheduler.max_attempts - 1
        assert all(a.cell_uuid == first.cell_uuid for a in alts)
        assert not chosen & {a.service_host for a in alts}
        held = placement.allocations[instance]["allocations"]
        assert list(held) == [first.compute_node_uuid]
        assert all(a.allocation_request != "null" for a in row)
