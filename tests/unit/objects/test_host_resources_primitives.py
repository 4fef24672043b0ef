"""host_resources reads compute-node primitives with the codec's rules (objects/codec)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asyncsched.objects.codec import CodecError
from asyncsched.objects.host_resources import (
    HostNUMACell,
    HostNUMATopology,
    NUMAPagesTopology,
    PciDevicePool,
    parse_host_numa_topology,
    parse_pci_pools,
)
from tests.support.nova_objects import host_numa_topology_primitive, pci_pools_primitive

TOPO = HostNUMATopology(
    cells=(
        HostNUMACell(
            id=0,
            cpuset=frozenset({0, 1}),
            memory=1024,
            mempages=(NUMAPagesTopology(size_kb=4, total=262144),),
        ),
    )
)


def _topology(**cell_over: Any) -> dict[str, Any]:
    prim = host_numa_topology_primitive(TOPO)
    prim["nova_object.data"]["cells"][0]["nova_object.data"].update(cell_over)
    return prim


def test_primitives_are_written_as_nova_stores_them() -> None:
    prim = host_numa_topology_primitive(TOPO)
    assert prim["nova_object.version"] == "1.2"
    cell = prim["nova_object.data"]["cells"][0]
    assert cell["nova_object.name"] == "NUMACell" and cell["nova_object.version"] == "1.5"
    assert cell["nova_object.changes"] == sorted(cell["nova_object.data"])
    pages = cell["nova_object.data"]["mempages"][0]
    assert pages["nova_object.version"] == "1.1"
    pools = pci_pools_primitive([PciDevicePool("8086", "154d", 0, 2, {"dev_type": "type-PF"})])
    assert pools["nova_object.name"] == "PciDevicePoolList"
    assert pools["nova_object.data"]["objects"][0]["nova_object.version"] == "1.1"


def test_round_trip() -> None:
    assert parse_host_numa_topology(json.dumps(host_numa_topology_primitive(TOPO))) == TOPO


def test_a_bad_integer_names_its_path() -> None:
    with pytest.raises(CodecError, match=r"cell\.id"):
        parse_host_numa_topology(json.dumps(_topology(id="zero")))
    with pytest.raises(ValueError, match="memory"):
        parse_host_numa_topology(json.dumps(_topology(memory=1.5)))


def test_integers_coerce_like_novas_integer_field() -> None:
    got = parse_host_numa_topology(json.dumps(_topology(memory=" 2048 ", cpu_usage=True)))
    assert got is not None
    assert got.cells[0].memory == 2048 and got.cells[0].cpu_usage == 1


def test_another_major_version_or_namespace_is_refused() -> None:
    prim = host_numa_topology_primitive(TOPO)
    prim["nova_object.version"] = "2.0"
    with pytest.raises(ValueError, match=r"NUMATopology version 2\.0"):
        parse_host_numa_topology(json.dumps(prim))
    pools = pci_pools_primitive([PciDevicePool("8086", "154d", 0, 2)])
    pools["nova_object.data"]["objects"][0]["nova_object.namespace"] = "cinder"
    with pytest.raises(ValueError, match="namespace"):
        parse_pci_pools(json.dumps(pools))


def test_a_wrong_object_name_is_refused() -> None:
    prim = host_numa_topology_primitive(TOPO)
    prim["nova_object.data"]["cells"][0]["nova_object.name"] = "InstanceNUMACell"
    with pytest.raises(ValueError, match="expected NUMACell"):
        parse_host_numa_topology(json.dumps(prim))
