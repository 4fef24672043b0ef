"""Turn nova's database rows into host-state values, the way nova's HostState.update does.

Pure functions, no I/O: the cache feeds them asyncpg records (or any mapping with nova's
column names) and applies the results under each host's lock. A malformed JSON column never
breaks a load: that field falls back to None/empty and one warning is logged per host.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from asyncsched.common.clock import as_utc
from asyncsched.conf.options import Config, DefaultOptions
from asyncsched.objects.host_resources import (
    HostNUMATopology,
    PciDevicePool,
    parse_host_numa_topology,
    parse_pci_pools,
)
from asyncsched.objects.image_props import canonical_hv_spec, canonical_image_props
from asyncsched.state.host_state import ServiceInfo

LOG = logging.getLogger(__name__)

Warn = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """Everything one ``compute_nodes`` row says, already parsed; allocation ratios are raw."""

    uuid: str
    host: str
    nodename: str
    cell_uuid: str
    compute_node_id: int
    total_usable_ram_mb: int
    free_ram_mb: int
    total_usable_disk_gb: int
    disk_mb_used: int
    free_disk_mb: int
    vcpus_total: int
    vcpus_used: int
    raw_cpu_allocation_ratio: float | None
    raw_ram_allocation_ratio: float | None
    raw_disk_allocation_ratio: float | None
    num_instances: int
    num_io_ops: int
    failed_builds: int
    stats: dict[str, str] = field(default_factory=dict)
    host_ip: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: int | None = None
    cpu_info: str | None = None
    supported_instances: tuple[tuple[str, str, str], ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    numa_topology: HostNUMATopology | None = None
    pci_pools: tuple[PciDevicePool, ...] = ()
    updated: datetime | None = None


def aware(ts: datetime | None) -> datetime | None:
    """nova stores naive UTC; we hand out timezone-aware UTC datetimes."""
    return None if ts is None else as_utc(ts)


def effective_ratio(raw: float | None, override: float | None, initial: float) -> float:
    """nova's ComputeNode rule: a 0.0/NULL ratio becomes ``[DEFAULT] x_allocation_ratio``, or
    ``initial_x_allocation_ratio`` when that is unset. A set, non-zero DB value wins."""
    if raw is None or raw == 0.0:
        return override if override is not None and override != 0.0 else initial
    return float(raw)


def resolve_ratios(snap: NodeSnapshot, defaults: DefaultOptions) -> tuple[float, float, float]:
    """(cpu, ram, disk) allocation ratios of a node under the current config."""
    return (
        effective_ratio(
            snap.raw_cpu_allocation_ratio,
            defaults.cpu_allocation_ratio,
            defaults.initial_cpu_allocation_ratio,
        ),
        effective_ratio(
            snap.raw_ram_allocation_ratio,
            defaults.ram_allocation_ratio,
            defaults.initial_ram_allocation_ratio,
        ),
        effective_ratio(
            snap.raw_disk_allocation_ratio,
            defaults.disk_allocation_ratio,
            defaults.initial_disk_allocation_ratio,
        ),
    )


def parse_stats(text: str | None) -> dict[str, str]:
    """compute_nodes.stats: a JSON dict; values kept as strings as nova keeps them."""
    if not text:
        return {}
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("stats is not a JSON object")
    return {str(k): str(v) for k, v in data.items()}


def _int_stat(stats: Mapping[str, str], key: str) -> int:
    try:
        return int(stats.get(key, 0))
    except (TypeError, ValueError):
        return 0


#: nova's MonitorMetricList.from_json scales these (reported as 0..1) to percent.
PERCENT_METRICS = frozenset(
    (
        "cpu.user.percent",
        "cpu.kernel.percent",
        "cpu.idle.percent",
        "cpu.iowait.percent",
        "cpu.percent",
    )
)


def parse_metrics(text: str | None) -> dict[str, float]:
    """compute_nodes.metrics: a JSON list of MonitorMetric dicts -> {name: value}.

    As nova's ``MonitorMetricList.from_json`` reads them: the percent metrics times 100, then
    every value an integer (``MonitorMetric.value`` is an IntegerField: 0.57 -> 57, 2.7 -> 2).
    Weighing the raw fractions ranks hosts differently from nova.
    """
    if not text:
        return {}
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("metrics is not a JSON list")
    out: dict[str, float] = {}
    for item in data:
        if isinstance(item, dict) and "name" in item and "value" in item:
            name, value = str(item["name"]), item["value"]
            if name in PERCENT_METRICS:
                value = float(value) * 100
            out[name] = int(value)
    return out


@functools.lru_cache(maxsize=1024)
def parse_supported_instances(text: str | None) -> tuple[tuple[str, str, str], ...]:
    """compute_nodes.supported_instances: JSON list of [arch, hv_type, vm_mode], each triple
    canonicalised as nova's ``HVSpec.from_list`` does (its fields are enums).

    Cached by text: a cloud has a handful of distinct lists, so refreshes skip the JSON and
    hosts with equal lists share one (immutable) tuple, which filters can key by identity."""
    if not text:
        return ()
    data = json.loads(text)
    if not isinstance(data, list):
        raise ValueError("supported_instances is not a JSON list")
    out = []
    for item in data:
        if isinstance(item, list | tuple) and len(item) == 3:
            out.append(canonical_hv_spec(str(item[0]), str(item[1]), str(item[2])))
    return tuple(out)


def _guard(bad: list[str], name: str, fn: Callable[[Any], Any], value: Any, fallback: Any) -> Any:
    try:
        return fn(value)
    except Exception as exc:  # malformed JSON from a compute must not break the load
        bad.append(f"{name} ({type(exc).__name__}: {exc})")
        return fallback


def node_snapshot(row: Mapping[str, Any], cell_uuid: str) -> NodeSnapshot | None:
    """Build a snapshot from one live compute_nodes row, or None when nova would not use it:
    ``free_disk_gb`` NULL ("usage not updated yet") or no uuid / hypervisor_hostname."""
    node_uuid = row["uuid"]
    nodename = row["hypervisor_hostname"]
    host = row["host"]
    if not node_uuid or not nodename or not host:
        LOG.warning(
            "cell %s: compute node id=%s has no uuid/host/hypervisor_hostname; skipped",
            cell_uuid,
            row["id"],
        )
        return None
    free_disk_gb = row["free_disk_gb"]
    if free_disk_gb is None:
        LOG.debug("compute node %s (%s): usage not updated yet; skipped", nodename, node_uuid)
        return None
    least = row["disk_available_least"]
    free_gb = free_disk_gb
    if least is not None:
        if least > free_disk_gb:
            LOG.debug(
                "host %s has more disk space than the database expected (%s GB > %s GB)",
                nodename,
                least,
                free_disk_gb,
            )
        free_gb = min(least, free_disk_gb)

    bad: list[str] = []
    stats = _guard(bad, "stats", parse_stats, row["stats"], {})
    numa = _guard(bad, "numa_topology", parse_host_numa_topology, row["numa_topology"], None)
    pci = _guard(bad, "pci_stats", parse_pci_pools, row["pci_stats"], ())
    metrics = _guard(bad, "metrics", parse_metrics, row["metrics"], {})
    supported = _guard(
        bad, "supported_instances", parse_supported_instances, row["supported_instances"], ()
    )
    if bad:
        LOG.warning(
            "compute node %s (%s): unparsable %s; those fields are empty",
            nodename,
            node_uuid,
            "; ".join(bad),
        )
    host_ip = row["host_ip"]
    hv_version = row["hypervisor_version"]
    free_ram = row["free_ram_mb"]
    return NodeSnapshot(
        uuid=str(node_uuid),
        host=str(host),
        nodename=str(nodename),
        cell_uuid=cell_uuid,
        compute_node_id=int(row["id"]),
        total_usable_ram_mb=int(row["memory_mb"]),
        free_ram_mb=int(free_ram) if free_ram is not None else 0,
        total_usable_disk_gb=int(row["local_gb"]),
        disk_mb_used=int(row["local_gb_used"]) * 1024,
        free_disk_mb=int(free_gb) * 1024,
        vcpus_total=int(row["vcpus"]),
        vcpus_used=int(row["vcpus_used"]),
        raw_cpu_allocation_ratio=row["cpu_allocation_ratio"],
        raw_ram_allocation_ratio=row["ram_allocation_ratio"],
        raw_disk_allocation_ratio=row["disk_allocation_ratio"],
        num_instances=_int_stat(stats, "num_instances"),
        num_io_ops=_int_stat(stats, "io_workload"),
        failed_builds=_int_stat(stats, "failed_builds"),
        stats=stats,
        host_ip=str(host_ip) if host_ip is not None else None,
        hypervisor_type=row["hypervisor_type"],
        hypervisor_version=int(hv_version) if hv_version is not None else None,
        cpu_info=row["cpu_info"],
        supported_instances=supported,
        metrics=metrics,
        numa_topology=numa,
        pci_pools=pci,
        updated=aware(row["updated_at"] or row["created_at"]),
    )


def service_info(row: Mapping[str, Any]) -> ServiceInfo:
    """A services row -> ServiceInfo, exactly (liveness is ComputeFilter's business)."""
    return ServiceInfo(
        id=int(row["id"]),
        host=str(row["host"]),
        binary=str(row["binary"] or "nova-compute"),
        disabled=bool(row["disabled"]),
        disabled_reason=row["disabled_reason"],
        forced_down=bool(row["forced_down"]),
        last_seen_up=aware(row["last_seen_up"]),
        created_at=aware(row["created_at"]),
        updated_at=aware(row["updated_at"]),
        version=int(row["version"] or 0),
        uuid=row["uuid"],
    )


# ---- instance image properties (ImagePropertiesWeigher) ------------------------------------
#
# nova builds ``instance.image_meta`` from the instance's ``instance_system_metadata`` rows:
# keys ``image_<name>`` lose the prefix, ``min_ram``/``min_disk``/``disk_format``/
# ``container_format`` go to the image itself, ``mappings``/``block_device_mapping`` (and their
# ``img_`` names) are never stored, and ``ImageMetaProps.from_dict`` keeps only its own fields,
# each coerced to its field type (``asyncsched.objects.image_props`` owns those rules). The
# weigher compares ``str()`` of those typed values, so we keep exactly those strings.

#: HostState.extra keys the host-state cache fills while the weigher can matter.
IMAGE_PROPS_KEY = "instance_image_props"  # {instance uuid: {prop: value string}}
IMAGE_PROP_COUNTS_KEY = "instance_image_prop_counts"  # {(prop, value string): instances}

SM_IMAGE_PROP_PREFIX = "image_"
SM_INHERITABLE_KEYS = frozenset({"min_ram", "min_disk", "disk_format", "container_format"})
SM_SKIP_KEYS = frozenset(
    {"mappings", "block_device_mapping", "img_mappings", "img_block_device_mapping"}
)


def image_props_from_system_metadata(rows: Iterable[tuple[str, str | None]]) -> dict[str, str]:
    """(key, value) rows of one instance's ``instance_system_metadata`` -> the image
    properties nova's ``instance.image_meta.properties.to_dict()`` would give, as strings."""
    raw: dict[str, str] = {}
    for key, value in rows:
        if value is None or not key.startswith(SM_IMAGE_PROP_PREFIX):
            continue
        name = key[len(SM_IMAGE_PROP_PREFIX) :]
        if name in SM_SKIP_KEYS or name in SM_INHERITABLE_KEYS:
            continue
        raw[name] = value
    return canonical_image_props(raw, keep_unknown=False)


def image_props_wanted(config: Config) -> bool:
    """Does ImagePropertiesWeigher need the instances' image properties under ``config``?

    nova's weigher returns 0 for every host unless ``[filter_scheduler]
    image_props_weight_multiplier`` is non-zero, whatever the aggregates say (their
    ``image_props_weight_multiplier`` metadata only scales that 0), so only the config value
    counts; and only when the weigher is among ``weight_classes``.
    """
    fs = config.filter_scheduler
    if fs.image_props_weight_multiplier == 0.0:
        return False
    for raw in fs.weight_classes:
        name = raw.strip()
        if name.endswith(".all_weighers") or name.rsplit(".", 1)[-1] == "ImagePropertiesWeigher":
            return True
    return False


def image_prop_counts(
    instances: Iterable[str], images: Mapping[str, Mapping[str, Any]]
) -> dict[tuple[str, str], int]:
    """(prop, value string) -> how many of ``instances`` have an image carrying that pair
    (each instance counts a pair once, as nova's per-instance set does)."""
    counts: dict[tuple[str, str], int] = {}
    for uuid in instances:
        props = images.get(uuid)
        if props:
            for k, v in props.items():
                pair = (k, str(v))
                counts[pair] = counts.get(pair, 0) + 1
    return counts
