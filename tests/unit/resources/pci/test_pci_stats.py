"""PCI pool accounting: nova's PciDeviceStats rules, table-driven."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from asyncsched.objects.host_resources import PciDevicePool
from asyncsched.objects.models import InstancePCIRequest
from asyncsched.resources.pci import (
    PciRequestFailed,
    candidate_pci_key,
    pci_apply_requests,
    pci_check_requests,
    pci_support_requests,
)
from tests.support.numa_data import pci_request, pools

PCI = pools("pci_pools.json")
PLACED = pools("pci_pools_placement.json")
RP_A = "aaaaaaaa-0000-0000-0000-000000000000"
RP_B = "bbbbbbbb-0000-0000-0000-000000000000"
RP_C = "cccccccc-0000-0000-0000-000000000000"


@dataclass(frozen=True)
class Case:
    id: str
    requests: tuple[InstancePCIRequest, ...]
    code: str | None  # None: satisfiable
    counts_after: tuple[int, ...] | None = None  # per input pool, 0 = dropped
    pools: tuple[PciDevicePool, ...] = PCI
    mapping: dict[str, list[str]] | None = None


CASES = [
    Case("one-vf", (pci_request("8086", "1520"),), None, (1, 4, 1, 1, 2)),
    Case(
        "case-insensitive-ids",
        (pci_request("8086", "1520", physical_network="PHYSNET1"),),
        None,
        (1, 4, 1, 1, 2),
    ),
    Case("spans-pools-in-order", (pci_request("8086", "1520", 3),), None, (0, 3, 1, 1, 2)),
    Case("all-six", (pci_request("8086", "1520", 6),), None, (0, 0, 1, 1, 2)),
    Case("seven-is-too-many", (pci_request("8086", "1520", 7),), "pci:not-enough-devices"),
    Case("unknown-device", (pci_request("1234", "5678"),), "pci:no-matching-device"),
    Case(
        "tag-mismatch",
        (pci_request("8086", "1520", physical_network="physnet2"),),
        "pci:no-matching-device",
    ),
    Case("pf-not-requested", (pci_request("8086", "1521"),), "pci:not-enough-devices"),
    Case("pf-requested", (pci_request("8086", "1521", dev_type="type-PF"),), None, (2, 4, 0, 1, 2)),
    Case("remote-managed-not-requested", (pci_request("15b3", "101e"),), "pci:not-enough-devices"),
    Case(
        "remote-managed-requested",
        (pci_request("15b3", "101e", remote_managed="True"),),
        None,
        (2, 4, 1, 1, 1),
    ),
    Case(
        "two-requests-cumulate",
        (
            pci_request("8086", "1520", 4, request_id="r1"),
            pci_request("8086", "1520", 3, request_id="r2"),
        ),
        "pci:not-enough-devices",
    ),
    Case(
        "two-requests-fit",
        (
            pci_request("8086", "1520", 4, request_id="r1"),
            pci_request("10de", "1db4", 1, request_id="r2"),
        ),
        None,
        (0, 2, 1, 0, 2),
    ),
    Case(
        "ignores-placement-spec-keys",
        (pci_request("10de", "1db4", resource_class="CUSTOM_GPU", traits="X"),),
        None,
        (2, 4, 1, 0, 2),
    ),
    # PCI in Placement: each request group maps to a provider; follow it exactly.
    Case(
        "placement-two-providers",
        (pci_request("10de", "1eb8", 2, request_id="r1"),),
        None,
        (1, 1),
        PLACED,
        {"r1-0": [RP_A], "r1-1": [RP_B], "": ["root"]},
    ),
    Case(
        "placement-one-provider",
        (pci_request("10de", "1eb8", 2, request_id="r1"),),
        None,
        (0, 2),
        PLACED,
        {"r1-0": [RP_A], "r1-1": [RP_A]},
    ),
    Case(
        "placement-unknown-provider",
        (pci_request("10de", "1eb8", 2, request_id="r1"),),
        "pci:placement-mismatch",
        None,
        PLACED,
        {"r1-0": [RP_C], "r1-1": [RP_C]},
    ),
    Case(
        "placement-provider-short",
        (pci_request("10de", "1eb8", 3, request_id="r1"),),
        "pci:placement-mismatch",
        None,
        PLACED,
        {"r1-0": [RP_A], "r1-1": [RP_A], "r1-2": [RP_A]},
    ),
    Case(
        "placement-spec-rp-uuids-without-mapping",
        (pci_request("10de", "1eb8", 2, request_id="r1", rp_uuids=f"{RP_B},{RP_B}"),),
        None,
        (2, 0),
        PLACED,
        None,
    ),
    Case(
        "placement-port-requests-ignore-mapping",
        (pci_request("10de", "1eb8", 1, alias=None, request_id="r1"),),
        None,
        (1, 2),
        PLACED,
        {"r1-0": [RP_C]},
    ),
    Case("no-pools", (pci_request("8086", "1520"),), "pci:no-devices", None, ()),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_requests(case: Case) -> None:
    check = pci_check_requests(case.pools, case.requests, provider_mapping=case.mapping)
    assert check.code == case.code, check.detail
    assert pci_support_requests(case.pools, case.requests, provider_mapping=case.mapping) is (
        case.code is None
    )
    if case.code is not None:
        assert check.detail
        with pytest.raises(PciRequestFailed) as exc:
            pci_apply_requests(case.pools, case.requests, provider_mapping=case.mapping)
        assert exc.value.check.code == case.code
        return
    after = pci_apply_requests(case.pools, case.requests, provider_mapping=case.mapping)
    assert case.counts_after is not None
    expected = tuple(
        PciDevicePool(p.vendor_id, p.product_id, p.numa_node, n, p.tags)
        for p, n in zip(case.pools, case.counts_after, strict=True)
        if n
    )
    assert after == expected


def test_apply_does_not_touch_input_and_repeats_until_empty() -> None:
    req = (pci_request("8086", "1520", 2),)
    current = PCI
    rounds = 0
    while pci_support_requests(current, req):
        current = pci_apply_requests(current, req)
        rounds += 1
    assert rounds == 3
    assert PCI[0].count == 2  # the original values are untouched
    assert all(p.product_id != "1520" for p in current)


def test_fewest_tags_pool_used_first() -> None:
    many = PciDevicePool("8086", "1520", 0, 1, {"dev_type": "type-VF", "a": "1", "b": "2"})
    few = PciDevicePool("8086", "1520", 0, 1, {"dev_type": "type-VF"})
    after = pci_apply_requests((many, few), (pci_request("8086", "1520"),))
    assert after == (many,)


def test_candidate_key_only_depends_on_pci_providers() -> None:
    reqs = (pci_request("10de", "1eb8", 1, request_id="r1"),)
    a = candidate_pci_key(reqs, {"": ["root1"], "r1-0": [RP_A]})
    b = candidate_pci_key(reqs, {"": ["root2"], "r1-0": [RP_A]})
    c = candidate_pci_key(reqs, {"": ["root1"], "r1-0": [RP_B]})
    assert a == b != c
    assert candidate_pci_key((), {"": ["x"]}) == candidate_pci_key((), {"": ["y"]})
