"""Parsing compute_nodes.numa_topology / pci_stats into values, and back."""

from __future__ import annotations

import json

import pytest

from asyncsched.objects.cpu_spec import parse_cpu_spec
from asyncsched.objects.host_resources import (
    HostNUMACell,
    HostNUMATopology,
    NUMAPagesTopology,
    PciDevicePool,
    parse_host_numa_topology,
    parse_pci_pools,
)
from tests.support.nova_objects import host_numa_topology_primitive, pci_pools_primitive
from tests.support.numa_data import DATA, GIB_KB


def test_seed_topology_fields() -> None:
    topo = parse_host_numa_topology((DATA / "seed_1g_one_cell.json").read_text())
    assert topo is not None
    c0, c1 = topo.cells
    assert (c0.id, c1.id) == (0, 1)
    assert c0.cpuset == frozenset({0, 1, 2, 3, 8, 9, 10, 11})
    assert c0.siblings[0] == frozenset({0, 8})
    assert c0.memory == 16384 and c0.socket == 0 and c1.socket == 1
    assert [p.size_kb for p in c0.mempages] == [4, 2048]
    assert [p.size_kb for p in c1.mempages] == [4, 2048, GIB_KB]
    assert c1.pages(GIB_KB) == NUMAPagesTopology(size_kb=GIB_KB, total=4)
    assert topo.has_threads


def test_round_trip_keeps_everything() -> None:
    topo = HostNUMATopology(
        cells=(
            HostNUMACell(
                id=3,
                cpuset=frozenset({1, 2}),
                pcpuset=frozenset({5, 6}),
                memory=1000,
                cpu_usage=2,
                memory_usage=100,
                pinned_cpus=frozenset({5}),
                siblings=(frozenset({1, 5}), frozenset({2, 6})),
                mempages=(NUMAPagesTopology(4, 1000, 10, 5), NUMAPagesTopology(2048, 8, 1, 2)),
                network_metadata_physnets=frozenset({"p1"}),
                network_metadata_tunneled=True,
                socket=1,
            ),
        )
    )
    text = json.dumps(host_numa_topology_primitive(topo))
    assert parse_host_numa_topology(text) == topo
    pools = (
        PciDevicePool("8086", "1520", 0, 3, {"dev_type": "type-VF", "physical_network": "x"}),
        PciDevicePool("10de", "1db4", None, 1, {}),
    )
    assert parse_pci_pools(json.dumps(pci_pools_primitive(pools))) == pools


def test_legacy_numa_format_is_migrated() -> None:
    topo = parse_host_numa_topology((DATA / "legacy_format.json").read_text())
    assert topo is not None
    c0, c1 = topo.cells
    assert c0.cpuset == frozenset({0, 1, 2, 3}) and c0.memory == 2048
    assert c0.memory_usage == 512 and c0.cpu_usage == 1
    assert c1.cpuset == frozenset({4, 5, 7})
    assert c0.pcpuset == frozenset() and c0.mempages == () and c0.siblings == ()


def test_cells_without_newer_fields_default() -> None:
    # A NUMACell 1.2 primitive: no pcpuset, network_metadata nor socket.
    prim = {
        "nova_object.name": "NUMATopology",
        "nova_object.version": "1.2",
        "nova_object.data": {
            "cells": [
                {
                    "nova_object.name": "NUMACell",
                    "nova_object.version": "1.2",
                    "nova_object.data": {"id": 0, "cpuset": [0, 1], "memory": 512},
                }
            ]
        },
    }
    topo = parse_host_numa_topology(json.dumps(prim))
    assert topo == HostNUMATopology(
        cells=(HostNUMACell(id=0, cpuset=frozenset({0, 1}), memory=512),)
    )


@pytest.mark.parametrize("text", [None, "", "   ", "null"])
def test_empty_numa_is_none(text: str | None) -> None:
    assert parse_host_numa_topology(text) is None


def _cell(**data: object) -> str:
    base: dict[str, object] = {"id": 0, "cpuset": [0], "memory": 1}
    base.update(data)
    return json.dumps(
        {
            "nova_object.name": "NUMATopology",
            "nova_object.data": {
                "cells": [{"nova_object.name": "NUMACell", "nova_object.data": base}]
            },
        }
    )


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        '"a string"',
        json.dumps({"nova_object.name": "NUMATopology", "nova_object.data": {"cells": 3}}),
        json.dumps({"nova_object.name": "Flavor", "nova_object.data": {}}),
        _cell(id=None),
        _cell(cpuset=["a"]),
        _cell(cpuset=7),
        _cell(memory="lots"),
        _cell(memory=1.5),
        _cell(siblings=[[0], "x"]),
        _cell(mempages=[{"nova_object.data": {"total": 3}}]),
        _cell(mempages=[{"nova_object.data": {"size_kb": 0, "total": 3}}]),
        _cell(network_metadata={"nova_object.data": {"physnets": [1]}}),
        json.dumps({"cells": [{"id": 0, "cpus": "3-1"}]}),
        json.dumps({"cells": [{"id": 0, "cpus": "x"}]}),
        json.dumps({"cells": [{"cpus": "0"}]}),
        json.dumps(
            {
                "nova_object.name": "NUMATopology",
                "nova_object.data": {
                    "cells": [{"nova_object.data": {"id": 0}}, {"nova_object.data": {"id": 0}}]
                },
            }
        ),
    ],
)
def test_malformed_numa_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_host_numa_topology(text)


def test_cpu_spec() -> None:
    assert parse_cpu_spec("0-3,^2, 8") == frozenset({0, 1, 3, 8})
    assert parse_cpu_spec("") == frozenset()


def test_pci_pools_from_data_file() -> None:
    pools = parse_pci_pools((DATA / "pci_pools.json").read_text())
    assert len(pools) == 5
    assert pools[0] == PciDevicePool(
        "8086", "1520", 0, 2, {"dev_type": "type-VF", "physical_network": "physnet1"}
    )
    assert pools[3].numa_node is None


def test_pci_pools_legacy_formats_and_null_tags() -> None:
    flat = [
        {
            "vendor_id": "8086",
            "product_id": "1520",
            "numa_node": 1,
            "count": 2,
            "physical_network": "p",
            "trusted": None,
        }
    ]
    assert parse_pci_pools(json.dumps(flat)) == (
        PciDevicePool("8086", "1520", 1, 2, {"physical_network": "p"}),
    )
    single = {"vendor_id": "8086", "product_id": "1520", "count": 1}
    assert parse_pci_pools(json.dumps(single)) == (PciDevicePool("8086", "1520", None, 1, {}),)
    for empty in (None, "", "[]", "{}", "null"):
        assert parse_pci_pools(empty) == ()


@pytest.mark.parametrize(
    "text",
    [
        "{oops",
        '"x"',
        json.dumps([{"vendor_id": "8086", "product_id": "1"}]),
        json.dumps([{"vendor_id": 8086, "product_id": "1", "count": 1}]),
        json.dumps([{"vendor_id": "8086", "product_id": "1", "count": "many"}]),
        json.dumps([{"vendor_id": "8086", "product_id": "1", "count": 1, "x": [1]}]),
        json.dumps(
            {
                "nova_object.name": "PciDevicePoolList",
                "nova_object.data": {
                    "objects": [
                        {
                            "nova_object.data": {
                                "vendor_id": "8086",
                                "product_id": "1",
                                "count": 1,
                                "tags": [],
                            }
                        }
                    ]
                },
            }
        ),
        json.dumps([3]),
    ],
)
def test_malformed_pci_raises_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        parse_pci_pools(text)
