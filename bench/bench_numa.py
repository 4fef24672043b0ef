"""NUMA fitting cost per host on a realistic two-socket host.

Host: 2 NUMA cells x 28 cores x 2 threads (4 shared cores per socket, the rest dedicated),
4K + 2M + 1G pages, three PCI pools, about a third of the dedicated CPUs already pinned. For
each request shape it prints the cost of one ``numa_fit_instance_to_host`` call and of one
NUMATopologyFilter ``host_passes`` on a host with 10 allocation candidates, next to nova's
per-candidate way (one fit per candidate) measured in the same run, and the ratio.

    .venv/bin/python -m bench.bench_numa [--candidates 10] [--runs 2000]

Measured on the 2-core CI machine (medians, microseconds per host):

    request                              fit  filter(10 cands)  nova-way(10 fits)  ratio
    shared 4vCPU 8G                      5.4        10.3              53.1          5.2x
    pinned 8vCPU 16G 1G-pages           17.9        23.0             181.3          7.9x
    pinned 16vCPU 2 nodes emu-isolate   33.8        39.8             334.1          8.4x
    pinned 4vCPU require + 2 VFs        26.6        39.1             274.6          7.0x
    no fit: 1G pages exhausted           8.7        13.7              87.5          6.4x
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from asyncsched.conf.options import Config
from asyncsched.objects.host_resources import (
    HostNUMATopology,
    PciDevicePool,
    parse_host_numa_topology,
    parse_pci_pools,
)
from asyncsched.objects.models import (
    Flavor,
    InstanceNUMACell,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NUMATopologyLimits,
    RequestSpec,
)
from asyncsched.resources.numa import numa_fit_instance_to_host, numa_usage_from_instance
from asyncsched.scheduling.filters.base import HostCandidate
from asyncsched.scheduling.filters.numa_topology import NUMATopologyFilter
from asyncsched.state.host_state import HostState

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "numa"
GIB_KB = 1024 * 1024


def _load() -> tuple[HostNUMATopology, tuple[PciDevicePool, ...]]:
    topo = parse_host_numa_topology((DATA / "two_socket_28c.json").read_text())
    assert topo is not None
    pools = parse_pci_pools((DATA / "pci_pools_bench.json").read_text())
    # Age the host: nine 4-vCPU pinned guests and a few shared ones already run on it.
    filler = InstanceNUMATopology(
        cells=(
            InstanceNUMACell(
                id=0, pcpuset=frozenset(range(4)), memory=4096, cpu_policy="dedicated"
            ),
        )
    )
    shared = InstanceNUMATopology(
        cells=(InstanceNUMACell(id=0, cpuset=frozenset(range(2)), memory=2048),)
    )
    for guest in [filler] * 9 + [shared] * 6:
        fitted = numa_fit_instance_to_host(topo, guest).fitted
        assert fitted is not None
        topo = numa_usage_from_instance(topo, fitted)
    return topo, pools


def _shapes() -> dict[str, tuple[InstanceNUMATopology, tuple[InstancePCIRequest, ...]]]:
    def ded(
        cid: int, cpus: range, mem: int, page: int | None = None, thread: str | None = None
    ) -> InstanceNUMACell:
        return InstanceNUMACell(
            id=cid,
            pcpuset=frozenset(cpus),
            memory=mem,
            pagesize=page,
            cpu_policy="dedicated",
            cpu_thread_policy=thread,
        )

    vf = InstancePCIRequest(
        count=2,
        spec=({"vendor_id": "8086", "product_id": "154c"},),
        alias_name="vf",
        request_id="r1",
        numa_policy="required",
    )
    return {
        "shared 4vCPU 8G": (
            InstanceNUMATopology(
                cells=(InstanceNUMACell(id=0, cpuset=frozenset(range(4)), memory=8192),)
            ),
            (),
        ),
        "pinned 8vCPU 16G 1G-pages": (
            InstanceNUMATopology(cells=(ded(0, range(8), 16384, GIB_KB),)),
            (),
        ),
        "pinned 16vCPU 2 nodes emu-isolate": (
            InstanceNUMATopology(
                cells=(ded(0, range(8), 8192, 2048), ded(1, range(8, 16), 8192, 2048)),
                emulator_threads_policy="isolate",
            ),
            (),
        ),
        "pinned 4vCPU require + 2 VFs": (
            InstanceNUMATopology(cells=(ded(0, range(4), 4096, thread="require"),)),
            (vf,),
        ),
        "no fit: 1G pages exhausted": (
            InstanceNUMATopology(cells=(ded(0, range(4), 80 * 1024, GIB_KB),)),
            (),
        ),
    }


def _median_us(fn: Callable[[], object], runs: int) -> float:
    for _ in range(20):
        fn()
    samples = []
    batch = 10
    for _ in range(max(1, runs // batch)):
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - t0) / batch * 1e6)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--candidates", type=int, default=10)
    ap.add_argument("--runs", type=int, default=2000)
    args = ap.parse_args(argv)

    topo, pools = _load()
    limits = NUMATopologyLimits(cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0)
    flt = NUMATopologyFilter(Config())
    cands = [{"allocations": {}, "mappings": {"": [f"rp-{i}"]}} for i in range(args.candidates)]
    state = HostState(
        uuid=str(uuid.uuid4()),
        host="h",
        nodename="h",
        cell_uuid="c",
        numa_topology=topo,
        pci_pools=pools,
    )

    print(
        f"host: 2 cells x 28 cores x 2 threads, 4K+2M+1G pages, {len(pools)} PCI pools; "
        f"{args.candidates} allocation candidates per host"
    )
    print(
        f"{'request':36} {'outcome':24} {'fit us':>7} {'filter us':>10} {'nova-way us':>12} "
        f"{'ratio':>6}"
    )
    for name, (guest, pci) in _shapes().items():
        spec = RequestSpec(
            flavor=Flavor(memory_mb=1, vcpus=1),
            numa_topology=guest,
            pci_requests=InstancePCIRequests(requests=pci),
        )

        def one_fit(
            guest: InstanceNUMATopology = guest, pci: tuple[InstancePCIRequest, ...] = pci
        ) -> object:
            return numa_fit_instance_to_host(
                topo, guest, limits=limits, pci_requests=pci, pci_pools=pools
            )

        def ours(spec: RequestSpec = spec) -> object:
            return flt.host_passes(HostCandidate(state, list(cands)), spec)

        def nova_way(
            guest: InstanceNUMATopology = guest, pci: tuple[InstancePCIRequest, ...] = pci
        ) -> object:
            return [
                numa_fit_instance_to_host(
                    topo,
                    guest,
                    limits=limits,
                    pci_requests=pci,
                    pci_pools=pools,
                    provider_mapping=c["mappings"],
                )
                for c in cands
            ]

        res = numa_fit_instance_to_host(
            topo, guest, limits=limits, pci_requests=pci, pci_pools=pools
        )
        outcome = f"cells {[c.id for c in res.fitted.cells]}" if res.fitted else str(res.code)
        fit_us = _median_us(one_fit, args.runs)
        ours_us = _median_us(ours, args.runs)
        nova_us = _median_us(nova_way, max(1, args.runs // 4))
        print(
            f"{name:36} {outcome:24} {fit_us:7.1f} {ours_us:10.1f} {nova_us:12.1f} "
            f"{nova_us / ours_us:5.1f}x"
        )


if __name__ == "__main__":
    main()
