"""Seeded random clouds and requests for the parity suite, as neutral JSON-able dicts.

A case names nova's own vocabulary (compute_nodes columns, extra specs, image properties,
scheduler hints, nova.conf options) and is skewed towards the corners where a scheduler
reimplementation can drift: metrics with percent names, version predicates, non-canonical
hypervisor names, multi-node compute services, NUMA pinning policies and PCI pools. The same
seed gives the same case on every machine (``random.Random`` only).
"""

from __future__ import annotations

import copy
import json
import random
import uuid
from typing import Any

from asyncsched.conf.options import DEFAULT_FILTERS  # nova 34's default enabled_filters

COMMON_FILTERS = (
    "AggregateImagePropertiesIsolation",
    "AggregateInstanceExtraSpecsFilter",
    "AggregateIoOpsFilter",
    "AggregateMultiTenancyIsolation",
    "AggregateNumInstancesFilter",
    "AggregateTypeAffinityFilter",
    "AllHostsFilter",
    "ComputeCapabilitiesFilter",
    "ComputeFilter",
    "DifferentHostFilter",
    "ImagePropertiesFilter",
    "IoOpsFilter",
    "IsolatedHostsFilter",
    "JsonFilter",
    "MetricsFilter",
    "NUMATopologyFilter",
    "NumInstancesFilter",
    "PciPassthroughFilter",
    "SameHostFilter",
    "ServerGroupAffinityFilter",
    "ServerGroupAntiAffinityFilter",
    "SimpleCIDRAffinityFilter",
)
#: ImagePropertiesWeigher is left out: nova's reads each instance's image from the database.
WEIGHERS = (
    "BuildFailureWeigher",
    "CPUWeigher",
    "CrossCellWeigher",
    "DiskWeigher",
    "HypervisorVersionWeigher",
    "IoOpsWeigher",
    "MetricsWeigher",
    "NumInstancesWeigher",
    "PCIWeigher",
    "RAMWeigher",
    "ServerGroupSoftAffinityWeigher",
    "ServerGroupSoftAntiAffinityWeigher",
)
METRICS = (
    "cpu.frequency",
    "cpu.user.time",
    "cpu.idle.time",
    "cpu.user.percent",
    "cpu.idle.percent",
    "cpu.percent",
    "numa.membw.current",
)
HV_SPECS = (
    ["x86_64", "qemu", "hvm"],
    ["x86_64", "kvm", "hvm"],
    ["X86_64", "QEMU", "HVM"],
    ["i686", "qemu", "hvm"],
    ["i386", "kvm", "hvm"],
    ["x86_64", "xapi", "xen"],
    ["x86_64", "qemu", "hv"],
    ["aarch64", "qemu", "hvm"],
)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _numa(rng: random.Random) -> list[dict[str, Any]]:
    cells = []
    per = rng.choice([2, 4])
    smt = rng.random() < 0.5
    cpu = 0
    for cid in range(rng.choice([1, 2, 2])):
        ids = list(range(cpu, cpu + 2 * per))
        cpu += 2 * per
        split = rng.choice([0, per, 2 * per])
        shared, dedicated = ids[:split], ids[split:]
        # libvirt reports every CPU's sibling set: pairs with SMT, singletons without
        siblings = [ids[i : i + 2] for i in range(0, len(ids), 2)] if smt else [[c] for c in ids]
        pinned = sorted(rng.sample(dedicated, rng.randrange(len(dedicated) + 1)))
        if smt and rng.random() < 0.5:  # nova pins whole cores on SMT hosts most of the time
            pinned = sorted({c for s in siblings for c in s if set(s) & set(pinned)})
        memory = rng.choice([4096, 8192, 16384])
        pages = [{"size_kb": 4, "total": memory * 256, "used": 0}]
        if rng.random() < 0.4:
            pages.append({"size_kb": 2048, "total": rng.choice([0, 64, 512]), "used": 0})
        cells.append(
            {
                "id": cid,
                "cpuset": shared,
                "pcpuset": dedicated,
                "memory": memory,
                "cpu_usage": rng.randrange(len(shared) * 2 + 1),
                "memory_usage": rng.randrange(memory // 2),
                "pinned_cpus": pinned,
                "siblings": siblings,
                "mempages": pages,
                "socket": cid,
            }
        )
    return cells


def _cpu_info(rng: random.Random) -> str:
    info: dict[str, Any] = {"arch": "x86_64", "model": "Haswell", "vendor": "Intel"}
    if rng.random() < 0.6:
        info["maxphysaddr"] = {"mode": "passthrough", "bits": rng.choice([39, 42, 46])}
    info["features"] = rng.sample(["vmx", "avx", "avx2", "aes"], 2)
    return json.dumps(info)


def _host(rng: random.Random, name: str, node: str, cell: str) -> dict[str, Any]:
    vcpus = rng.choice([4, 8, 16, 64])
    memory = rng.choice([8192, 32768, 131072])
    local = rng.choice([100, 500, 2000])
    metrics = [
        {
            "name": m,
            "value": round(rng.random(), 3) if "percent" in m else rng.randrange(1, 4000),
            "source": "libvirt.LibvirtDriver",
            "timestamp": "2026-01-01T11:59:00+00:00",
        }
        for m in rng.sample(METRICS, rng.randrange(len(METRICS) + 1))
    ]
    stats = {
        "num_instances": str(rng.randrange(0, 40)),
        "io_workload": str(rng.randrange(0, 10)),
        "failed_builds": str(rng.choice([0, 0, 0, 2])),
    }
    if rng.random() < 0.3:
        stats["ssd_ratio"] = str(rng.choice([1, 2, 5]))
    free_disk = rng.randrange(0, local + 1)
    supported: Any = [rng.choice(HV_SPECS) for _ in range(rng.choice([1, 1, 2]))]
    if rng.random() < 0.004:  # a NULL column (nova cannot load such a node)
        supported = None
    pools = []
    if rng.random() < 0.35:
        for product in rng.sample(["1520", "10fb"], rng.choice([1, 2])):
            pool: dict[str, Any] = {
                "vendor_id": "8086",
                "product_id": product,
                "numa_node": rng.choice([0, 1, None]),
                "count": rng.randrange(1, 4),
                "tags": {"dev_type": "type-PCI"},
            }
            pools.append(pool)
    return {
        "host": name,
        "node": node,
        "uuid": _uuid(rng),
        "cell": cell,
        "row": {
            "vcpus": vcpus,
            "memory_mb": memory,
            "local_gb": local,
            "vcpus_used": rng.randrange(0, vcpus * 3),
            "free_ram_mb": rng.randrange(-512, memory),
            "free_disk_gb": free_disk,
            "disk_available_least": rng.choice([None, free_disk, max(0, free_disk - 20)]),
            "hypervisor_type": rng.choice(["QEMU", "QEMU", "kvm"]),
            "hypervisor_version": rng.choice([8000000, 8002000, 9001000, 10000000]),
            "cpu_info": _cpu_info(rng),
            "host_ip": rng.choice(["10.0.0.%d", "10.1.2.%d", "fd00::%d"]) % rng.randrange(1, 250),
            "stats": stats,
            "metrics": metrics,
            "supported_instances": supported,
            "cpu_allocation_ratio": rng.choice([1.0, 4.0, 16.0]),
            "ram_allocation_ratio": rng.choice([1.0, 1.5]),
            "disk_allocation_ratio": 1.0,
            "numa": _numa(rng) if rng.random() < 0.5 else None,
            "pci_pools": pools,
        },
        "service": {
            "disabled": rng.random() < 0.05,
            "forced_down": rng.random() < 0.03,
            "age_s": rng.choice([5, 30, 55, 120]),
        },
        "instances": [],
    }


EXTRA_SPECS: tuple[dict[str, str], ...] = (
    {"capabilities:hypervisor_type": "QEMU"},
    {"capabilities:hypervisor_type": "s== kvm"},
    {"vcpus_total": ">= 16"},
    {"free_ram_mb": ">= 4096"},
    {"num_instances": "<= 20"},
    {"ssd_ratio": ">= 2"},
    {"hypervisor_version": ">= 9000000"},
    {"capabilities:cpu_info:arch": "x86_64"},
    {"capabilities:cpu_info:features": "<in> avx"},
    {"hw:maxphysaddr_bits": "40"},
    {"pci_stats": "<in> 8086"},
    {"limits": "{}"},
    {"host_ip": "s== 10.0.0.5"},
    {"aggregate_instance_extra_specs:ssd": "true"},
    {"ssd": "true"},
    {"hw:numa_nodes": "1"},
    {"hw:numa_nodes": "2"},
    {"hw:cpu_policy": "dedicated"},
    {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "require"},
    {"hw:cpu_policy": "dedicated", "hw:cpu_thread_policy": "isolate"},
    {"hw:cpu_policy": "dedicated", "hw:emulator_threads_policy": "isolate"},
    {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "^0"},
    {"hw:cpu_policy": "mixed", "hw:cpu_dedicated_mask": "0", "hw:numa_nodes": "2"},
    {"hw:mem_page_size": "large"},
    {"hw:mem_page_size": "2048"},
)
IMAGE_PROPS: tuple[dict[str, str], ...] = (
    {"hw_architecture": "x86_64"},
    {"hw_architecture": "i686"},
    {"hw_architecture": "aarch64"},
    {"img_hv_type": "qemu"},
    {"img_hv_type": "kvm"},
    {"hw_vm_mode": "hvm"},
    {"hw_vm_mode": "xen"},
    {"img_hv_requested_version": ">= 8"},
    {"img_hv_requested_version": ">= 8.0.0"},
    {"img_hv_requested_version": "< 9.1"},
    {"img_hv_requested_version": "== 8.2"},
    {"hw_cpu_policy": "dedicated"},
    {"hw_maxphysaddr_mode": "emulate", "hw_maxphysaddr_bits": "42"},
    {"hw_mem_page_size": "small"},
)


def _query(rng: random.Random, hosts: list[dict[str, Any]]) -> str:
    ip = rng.choice(hosts)["row"]["host_ip"]
    return json.dumps(
        rng.choice(
            [
                ["=", "$host_ip", ip],
                [">=", "$host_ip", "10.0.0.100"],
                [">=", "$free_ram_mb", 4096],
                ["and", [">", "$vcpus_total", 8], ["<", "$num_io_ops", 5]],
                ["=", "$hypervisor_type", "QEMU"],
                ["in", "$stats.ssd_ratio", "2", "5"],
                ["not", ["=", "$host", hosts[0]["host"]]],
            ]
        )
    )


def _request(rng: random.Random, hosts: list[dict[str, Any]], pool: list[str]) -> dict[str, Any]:
    extra: dict[str, str] = {}
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        extra.update(rng.choice(EXTRA_SPECS))
    props: dict[str, str] = {}
    for _ in range(rng.choice([0, 0, 1, 2])):
        props.update(rng.choice(IMAGE_PROPS))
    hints: dict[str, list[str]] = {}
    if rng.random() < 0.25:
        hints["query"] = [_query(rng, hosts)]
    if rng.random() < 0.1 and pool:
        hints[rng.choice(["same_host", "different_host"])] = rng.sample(pool, 1)
    if rng.random() < 0.1:
        hints["build_near_host_ip"] = ["10.0.0.1"]
        hints["cidr"] = [rng.choice(["/24", "/8"])]
    group = None
    if rng.random() < 0.35:
        members = rng.sample(pool, min(len(pool), rng.randrange(3)))
        group = {
            "policy": rng.choice(
                ["anti-affinity", "affinity", "soft-anti-affinity", "soft-affinity"]
            ),
            "members": members,
            "hosts": sorted({h["host"] for h in hosts if set(h["instances"]) & set(members)}),
            "rules": {},
        }
        if group["policy"] == "anti-affinity" and rng.random() < 0.3:
            group["rules"] = {"max_server_per_host": "2"}
    pci = []
    if rng.random() < 0.25:
        pci.append(
            {
                "count": rng.choice([1, 2]),
                "spec": {"vendor_id": "8086", "product_id": rng.choice(["1520", "10fb"])},
                "alias_name": "a1",
                "numa_policy": rng.choice([None, "legacy", "preferred", "required"]),
                "request_id": _uuid(rng),
            }
        )
    vcpus = rng.choice([1, 2, 2, 4])
    return {
        "instance_uuid": _uuid(rng),
        "flavor": {
            "memory_mb": rng.choice([512, 2048, 4096]),
            "vcpus": vcpus,
            "root_gb": rng.choice([1, 20, 80]),
            "ephemeral_gb": 0,
            "extra_specs": extra,
        },
        "image_props": props,
        "hints": hints,
        "group": group,
        "pci_requests": pci,
        "project_id": rng.choice(["p", "tenant-a"]),
        "num_instances": rng.choice([1, 1, 1, 2, 3]),
    }


def _config(rng: random.Random) -> dict[str, dict[str, Any]]:
    names = rng.sample(
        ["cpu.percent", "cpu.frequency", "cpu.idle.percent", "numa.membw.current"], 2
    )
    setting = [
        f"{n}{rng.choice(['', ' '])}={rng.choice(['1.0', '-1.0', '0.5', '2'])}" for n in names
    ]
    fs: dict[str, Any] = {
        "enabled_filters": list(COMMON_FILTERS),
        "ram_weight_multiplier": rng.choice([1.0, -1.0]),
        "cpu_weight_multiplier": rng.choice([1.0, 0.0]),
        "io_ops_weight_multiplier": rng.choice([-1.0, 2.0]),
        "num_instances_weight_multiplier": rng.choice([0.0, 1.0]),
        "soft_affinity_weight_multiplier": rng.choice([1.0, 2.0]),
        "soft_anti_affinity_weight_multiplier": rng.choice([1.0, 3.0]),
        "build_failure_weight_multiplier": rng.choice([1000000.0, 1.0]),
        "hypervisor_version_weight_multiplier": rng.choice([1.0, -1.0]),
        "pci_weight_multiplier": rng.choice([1.0, 0.0]),
        "max_io_ops_per_host": rng.choice([8, 3]),
        "max_instances_per_host": rng.choice([50, 20]),
        "isolated_hosts": [],
        "isolated_images": [],
        "aggregate_image_properties_isolation_namespace": None,
    }
    return {
        "compute": {"packing_host_numa_cells_allocation_strategy": rng.random() < 0.5},
        "filter_scheduler": fs,
        "metrics": {
            "weight_setting": setting,
            "required": rng.random() < 0.3,
            "weight_of_unavailable": -10000.0,
            "weight_multiplier": rng.choice([1.0, -1.0]),
        },
    }


def make_case(seed: int, n_hosts: int) -> dict[str, Any]:
    """One random case; ``seed`` alone decides it."""
    rng = random.Random(seed)
    cells = [_uuid(rng), _uuid(rng)]
    hosts: list[dict[str, Any]] = []
    i = 0
    while len(hosts) < n_hosts:
        name = f"cmp{i:03d}"
        nodes = rng.choice([1, 1, 1, 2, 3])  # several nodes: an ironic-style service
        alike = rng.random() < 0.6  # ironic nodes of one service are often identical
        for n in range(min(nodes, n_hosts - len(hosts))):
            node = name if nodes == 1 else f"{name}-n{n}"
            h = _host(rng, name, node, cells[i % 2])
            if alike and n:
                h["row"] = copy.deepcopy(hosts[-1]["row"])
            hosts.append(h)
        i += 1
    pool = [_uuid(rng) for _ in range(6)]
    for u in pool:
        if rng.random() < 0.7:
            rng.choice(hosts)["instances"].append(u)
    aggs = []
    for a in range(rng.randrange(4)):
        meta = rng.choice(
            [
                {"availability_zone": "az1"},
                {"ssd": "true"},
                {"ssd": "false"},
                {"filter_tenant_id": "tenant-a"},
                {"hw_architecture": "x86_64"},
                {"ram_weight_multiplier": "2.0"},
                {"metrics_weight_multiplier": "-1.0"},
                {"max_io_ops_per_host": "4"},
                {"max_instances_per_host": rng.choice(["10", "x"])},
                {"instance_type": rng.choice(["m1", "m1,m2", "other"])},
            ]
        )
        members = sorted({h["host"] for h in hosts if rng.random() < 0.4})
        aggs.append(
            {"id": a + 1, "uuid": _uuid(rng), "name": f"agg{a}", "hosts": members, "metadata": meta}
        )
    return {
        "seed": seed,
        "config": _config(rng),
        "weighers": list(WEIGHERS),
        # the multi-create runs nova's default filters (plus some): with all of them most
        # random requests would find no host at all
        "sequence_filters": [
            *DEFAULT_FILTERS,
            *rng.sample(["NUMATopologyFilter", "PciPassthroughFilter", "JsonFilter"], 1),
        ],
        "hosts": hosts,
        "aggregates": aggs,
        "request": _request(rng, hosts, pool),
    }
