"""Typed, immutable values for the nova objects the scheduler reads and writes.

These are the request model every other package works with. The codec in
``asyncsched.objects.codec`` is the only code that turns nova primitives into these values and
back; nothing else touches raw ``nova_object.*`` dicts. Defaults are nova's defaults for unset
fields. Mappings are plain dicts by type but are never mutated after construction: build a new
value with ``dataclasses.replace`` instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class Flavor:
    memory_mb: int
    vcpus: int
    root_gb: int = 0
    ephemeral_gb: int = 0
    swap: int = 0  # MB
    flavorid: str = ""
    id: int | None = None
    name: str | None = None
    rxtx_factor: float = 1.0
    vcpu_weight: int | None = None
    disabled: bool = False
    is_public: bool = True
    extra_specs: Mapping[str, str] = field(default_factory=dict)
    description: str | None = None


@dataclass(frozen=True, slots=True)
class ImageMetaProps:
    """Image properties. Fields the scheduler reads are typed; the rest stay in ``other``."""

    hw_architecture: str | None = None
    hw_emulation_architecture: str | None = None
    img_hv_type: str | None = None
    hw_vm_mode: str | None = None
    img_hv_requested_version: str | None = None
    hw_maxphysaddr_bits: int | None = None
    hw_cpu_policy: str | None = None
    hw_cpu_thread_policy: str | None = None
    hw_emulator_threads_policy: str | None = None
    hw_numa_nodes: int | None = None
    hw_mem_page_size: str | None = None
    hw_pci_numa_affinity_policy: str | None = None
    hw_cdrom_bus: str | None = None
    hw_disk_bus: str | None = None
    hw_video_model: str | None = None
    hw_vif_model: str | None = None
    hw_viommu_model: str | None = None
    hw_virtio_packed_ring: bool | None = None
    hw_sound_model: str | None = None
    hw_tpm_model: str | None = None
    hw_tpm_version: str | None = None
    hw_mem_encryption: bool | None = None
    hw_firmware_type: str | None = None
    os_secure_boot: str | None = None
    hw_ephemeral_encryption: bool | None = None
    hw_ephemeral_encryption_format: str | None = None
    traits_required: frozenset[str] = frozenset()
    other: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        """Read any property by nova's field name, typed or not."""
        if name in _IMAGE_PROP_FIELDS:
            value = getattr(self, name)
            return default if value is None else value
        return self.other.get(name, default)

    def items(self) -> list[tuple[str, Any]]:
        """Every set property, as nova's ``ImageMetaProps`` would list them."""
        out = [
            (n, getattr(self, n))
            for n in _IMAGE_PROP_FIELDS
            if n not in ("other", "traits_required") and getattr(self, n) is not None
        ]
        if self.traits_required:
            out.append(("traits_required", sorted(self.traits_required)))
        out.extend(self.other.items())
        return out


_IMAGE_PROP_FIELDS = frozenset(ImageMetaProps.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class ImageMeta:
    id: str | None = None
    name: str | None = None
    status: str | None = None
    disk_format: str | None = None
    container_format: str | None = None
    owner: str | None = None
    size: int | None = None
    min_ram: int | None = None
    min_disk: int | None = None
    properties: ImageMetaProps = field(default_factory=ImageMetaProps)


@dataclass(frozen=True, slots=True)
class VirtCPUTopology:
    sockets: int = 1
    cores: int = 1
    threads: int = 1


@dataclass(frozen=True, slots=True)
class InstanceNUMACell:
    id: int
    cpuset: frozenset[int] = frozenset()  # shared (floating) CPUs
    pcpuset: frozenset[int] = frozenset()  # dedicated (pinned) CPUs
    memory: int = 0  # MB
    pagesize: int | None = None  # KiB
    cpuset_reserved: frozenset[int] | None = None
    cpu_topology: VirtCPUTopology | None = None
    cpu_pinning: Mapping[int, int] | None = None
    cpu_policy: str | None = None
    cpu_thread_policy: str | None = None


@dataclass(frozen=True, slots=True)
class InstanceNUMATopology:
    cells: tuple[InstanceNUMACell, ...] = ()
    instance_uuid: str | None = None
    emulator_threads_policy: str | None = None


@dataclass(frozen=True, slots=True)
class InstancePCIRequest:
    count: int
    spec: tuple[Mapping[str, str], ...] = ()
    alias_name: str | None = None
    is_new: bool = False
    request_id: str | None = None
    requester_id: str | None = None
    numa_policy: str | None = None


@dataclass(frozen=True, slots=True)
class InstancePCIRequests:
    requests: tuple[InstancePCIRequest, ...] = ()
    instance_uuid: str | None = None


@dataclass(frozen=True, slots=True)
class InstanceGroup:
    uuid: str
    id: int | None = None
    name: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    policy: str | None = None
    policies: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    rules: Mapping[str, str] = field(default_factory=dict)

    @property
    def max_server_per_host(self) -> int:
        try:
            return int(self.rules.get("max_server_per_host", 1))
        except (TypeError, ValueError):
            return 1


@dataclass(frozen=True, slots=True)
class CellMapping:
    uuid: str
    name: str | None = None
    id: int | None = None
    disabled: bool = False


@dataclass(frozen=True, slots=True)
class Destination:
    host: str | None = None
    node: str | None = None
    cell: CellMapping | None = None
    aggregates: tuple[str, ...] = ()  # each entry is a comma-joined OR-set; entries AND-ed
    forbidden_aggregates: frozenset[str] = frozenset()
    allow_cross_cell_move: bool = False


@dataclass(frozen=True, slots=True)
class RequestGroup:
    use_same_provider: bool = True
    resources: Mapping[str, int] = field(default_factory=dict)
    required_traits: frozenset[str] = frozenset()
    forbidden_traits: frozenset[str] = frozenset()
    aggregates: tuple[tuple[str, ...], ...] = ()
    forbidden_aggregates: frozenset[str] = frozenset()
    requester_id: str | None = None
    provider_uuids: tuple[str, ...] = ()
    in_tree: str | None = None


@dataclass(frozen=True, slots=True)
class RequestLevelParams:
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtree: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class NetworkMetadata:
    physnets: frozenset[str] = frozenset()
    tunneled: bool = False


@dataclass(frozen=True, slots=True)
class NUMATopologyLimits:
    cpu_allocation_ratio: float
    ram_allocation_ratio: float
    network_metadata: NetworkMetadata | None = None


@dataclass(frozen=True, slots=True)
class SchedulerLimits:
    numa_topology: NUMATopologyLimits | None = None
    vcpu: int | None = None
    disk_gb: int | None = None
    memory_mb: int | None = None


@dataclass(frozen=True, slots=True)
class SchedulerRetries:
    num_attempts: int = 0
    hosts: tuple[tuple[str, str], ...] = ()  # (host, hypervisor_hostname)


@dataclass(frozen=True, slots=True)
class NetworkRequest:
    network_id: str | None = None
    address: str | None = None
    port_id: str | None = None
    pci_request_id: str | None = None
    tag: str | None = None
    arq_uuid: str | None = None
    device_profile: str | None = None


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """RequestSpec 1.15 with nova's defaults for every unset field."""

    flavor: Flavor
    id: int | None = None
    image: ImageMeta | None = None
    numa_topology: InstanceNUMATopology | None = None
    pci_requests: InstancePCIRequests | None = None
    project_id: str | None = None
    user_id: str | None = None
    availability_zone: str | None = None
    num_instances: int = 1
    ignore_hosts: tuple[str, ...] | None = None
    force_hosts: tuple[str, ...] | None = None
    force_nodes: tuple[str, ...] | None = None
    requested_destination: Destination | None = None
    retry: SchedulerRetries | None = None
    limits: SchedulerLimits | None = None
    instance_group: InstanceGroup | None = None
    scheduler_hints: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    instance_uuid: str | None = None
    security_groups: tuple[str, ...] = ()
    network_metadata: NetworkMetadata = field(default_factory=NetworkMetadata)
    is_bfv: bool = False
    requested_resources: tuple[RequestGroup, ...] = ()
    request_level_params: RequestLevelParams = field(default_factory=RequestLevelParams)
    requested_networks: tuple[NetworkRequest, ...] = ()

    def get_scheduler_hint(self, name: str, default: Any = None) -> Any:
        """nova's rule: a single-element list is unwrapped, a longer one returned whole."""
        value = self.scheduler_hints.get(name)
        if value is None:
            return default
        if len(value) == 1:
            return value[0]
        return list(value)

    @property
    def is_rebuild(self) -> bool:
        return tuple(self.scheduler_hints.get("_nova_check_type", ())) == ("rebuild",)

    @property
    def image_props(self) -> ImageMetaProps:
        return self.image.properties if self.image is not None else _EMPTY_PROPS


_EMPTY_PROPS = ImageMetaProps()


@dataclass(frozen=True, slots=True)
class Aggregate:
    id: int
    uuid: str
    name: str
    hosts: tuple[str, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def availability_zone(self) -> str | None:
        return self.metadata.get("availability_zone")


@dataclass(frozen=True, slots=True)
class Selection:
    """Selection 1.1: what select_destinations returns per instance and alternate."""

    compute_node_uuid: str
    service_host: str
    nodename: str
    cell_uuid: str
    limits: SchedulerLimits | None = None
    allocation_request: str | None = None  # JSON string, as nova sends it
    allocation_request_version: str | None = None
    availability_zone: str | None = None


@dataclass(frozen=True, slots=True)
class RequestContext:
    """The ``_context_*`` keys of a message. The auth token is kept out of repr and logs."""

    request_id: str | None = None
    global_request_id: str | None = None
    user_id: str | None = None
    project_id: str | None = None
    user_name: str | None = None
    project_name: str | None = None
    roles: tuple[str, ...] = ()
    is_admin: bool = False
    read_deleted: str = "no"
    timestamp: datetime | None = None
    remote_address: str | None = None
    auth_token: str | None = field(default=None, repr=False, compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
