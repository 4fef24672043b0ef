"""All nodes of one compute service see the same instances, as nova's HostManager's shared
instances dict makes them (ironic style: one nova-compute, many nodes).

The minimal case the parity suite found: an anti-affinity multi-create of two on a service
with two identical nodes. nova puts the second instance on another host; counting the first
only on its own node put both on one host.
"""

from __future__ import annotations

from collections import Counter

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, InstanceGroup, RequestSpec
from asyncsched.scheduling.filters.server_group_anti_affinity_filter import (
    ServerGroupAntiAffinityFilter,
)
from asyncsched.state import assumptions
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState
from tests.support.node_snapshots import snap

SPEC = RequestSpec(flavor=Flavor(memory_mb=1, vcpus=1))


def _node(name: str, host: str = "ironic") -> HostState:
    return HostState(uuid=name, host=host, nodename=name, cell_uuid="c", free_ram_mb=1000)


def _cache(*nodes: HostState) -> HostStateCache:
    cache = HostStateCache(Config())  # never started: the nodes are put in its table by hand
    for n in nodes:
        cache._table.by_host.setdefault(n.host, {})[n.nodename] = n
    return cache


async def test_an_instance_placed_on_one_node_is_on_every_node_of_its_service() -> None:
    n1, n2, other = _node("n1"), _node("n2"), _node("o1", host="other")
    cache = _cache(n1, n2, other)
    await cache.consume(n1, SPEC, "i1")
    assert n1.instances == n2.instances == {"i1"} and other.instances == set()
    group = InstanceGroup(uuid="g", policy="anti-affinity", members=("i1", "i2"))
    second = RequestSpec(flavor=SPEC.flavor, instance_group=group, instance_uuid="i2")
    f = ServerGroupAntiAffinityFilter(Config())
    assert [f.state_passes(h, second) for h in (n1, n2, other)] == [
        "anti-affinity",
        "anti-affinity",
        None,
    ]
    await cache.release(n1, "i1")
    assert n1.instances == n2.instances == set()


async def test_release_keeps_what_another_node_still_assumes() -> None:
    n1, n2 = _node("n1"), _node("n2")
    cache = _cache(n1, n2)
    await cache.consume(n1, SPEC, "i1")
    await cache.consume(n2, SPEC, "i2")
    await cache.release_many([(n1, "i1")])
    assert n1.instances == n2.instances == {"i2"}


def test_a_rebuilt_node_keeps_the_instances_pending_on_its_siblings() -> None:
    hs = _node("n2")
    assumptions.rebase(
        hs,
        snap("n2", "ironic"),
        None,
        base_insts={"old"},
        aggregates=(),
        image_props=None,
        config=Config(),
        now=0.0,
        metrics=Counter(),
        sibling_pending=("i1",),
    )
    assert hs.instances == {"old", "i1"}
