"""The once-per-request filters share one verdict among hosts with the same inputs; the shared
verdicts must be exactly the per-host ones, whatever mix of hosts and requests."""

from __future__ import annotations

import random

import pytest

from asyncsched.objects.models import ImageMeta, ImageMetaProps
from asyncsched.scheduling.filters.compute_capabilities_filter import ComputeCapabilitiesFilter
from asyncsched.scheduling.filters.image_props_filter import ImagePropertiesFilter
from asyncsched.state.host_state import HostState
from tests.support.sched_helpers import config, host, spec

TRIPLES = (("x86_64", "qemu", "hvm"), ("x86_64", "kvm", "hvm"), ("aarch64", "kvm", "hvm"))


def hosts(rng: random.Random, n: int) -> list[HostState]:
    out = []
    for i in range(n):
        out.append(
            host(
                f"h{i}",
                hypervisor_type=rng.choice(["QEMU", "KVM", None]),
                hypervisor_version=rng.choice([6002001, 8000000, None]),
                supported_instances=tuple(rng.sample(TRIPLES, rng.randint(0, 2))),
                cpu_info=rng.choice([None, '{"maxphysaddr": {"bits": 46}}', "{}"]),
                free_ram_mb=rng.choice([1024, 4096]),
                stats=rng.choice([{}, {"hypervisor_type": "QEMU"}, {"gpu": "yes"}]),
            )
        )
    return out


@pytest.mark.parametrize("seed", range(20))
def test_image_properties_shared_verdicts_are_the_per_host_ones(seed: int) -> None:
    rng = random.Random(seed)
    states = hosts(rng, 60)
    props: dict[str, object] = {}
    for name, values in (
        ("hw_architecture", ["x86_64", "aarch64"]),
        ("img_hv_type", ["kvm", "qemu"]),
        ("hw_vm_mode", ["hvm"]),
        ("img_hv_requested_version", [">= 7.0", "<= 7.0, >= 6.0"]),
        ("hw_maxphysaddr_bits", [40, 48]),
    ):
        if rng.random() < 0.5:
            props[name] = rng.choice(values)
    s = spec(image=ImageMeta(properties=ImageMetaProps(**props)))  # type: ignore[arg-type]
    f = ImagePropertiesFilter(config())
    assert f.filter_states(states, s) == [f.state_passes(h, s) for h in states]


@pytest.mark.parametrize("seed", range(20))
def test_compute_capabilities_shared_verdicts_are_the_per_host_ones(seed: int) -> None:
    rng = random.Random(seed)
    states = hosts(rng, 60)
    candidates = {
        "capabilities:hypervisor_type": ["QEMU", "s== KVM", "<or> QEMU <or> KVM"],
        "hypervisor_type": ["QEMU"],
        "capabilities:free_ram_mb": [">= 2048"],
        "free_ram_mb": ["== 1024"],
        "capabilities:hypervisor_version": [">= 7000000"],
        "capabilities:cpu_info:maxphysaddr:bits": [">= 40"],
        "gpu": ["yes"],
        "capabilities:stats": ["{}"],
    }
    extra = {k: rng.choice(v) for k, v in candidates.items() if rng.random() < 0.4}
    s = spec(extra_specs=extra)
    f = ComputeCapabilitiesFilter(config())
    assert f.filter_states(states, s) == [f.state_passes(h, s) for h in states]
