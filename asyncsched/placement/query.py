"""The ``GET /allocation_candidates`` query, built from a RequestSpec exactly as nova does.

nova's ``ResourceRequest.from_request_spec`` + ``scheduler.utils.resources_from_request_spec``:
the same groups, traits, aggregates, limits and the same sorted, urlencoded query string, so
Placement sees byte-for-byte what it would have seen from nova-scheduler.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlencode

from asyncsched.conf.options import Config
from asyncsched.exceptions import AsyncschedError, NoValidHost
from asyncsched.objects.models import Flavor, ImageMetaProps, RequestGroup, RequestSpec
from asyncsched.placement import constraints as hw
from asyncsched.placement.traits import HW_CPU_HYPERTHREADING, is_valid_resource_class

LOG = logging.getLogger(__name__)

# A flavor extra spec that asks Placement for a resource or a trait: prefix, group suffix, name.
EXTRA_SPEC_KEY = re.compile(r"^(resources|trait)([a-zA-Z0-9_-]{1,64})?:(.*)$")
#: Scheduler hints that must see every candidate, so the query gets no limit.
NO_LIMIT_HINTS = frozenset({"group", "same_host", "different_host"})


class RequestGroupSuffixConflict(AsyncschedError, ValueError):
    """Two request groups use the same suffix (nova's RequestGroupSuffixConflict)."""

    def __init__(self, suffix: str) -> None:
        super().__init__(f"Duplicate request group suffix {suffix}.")
        self.suffix = suffix


@dataclass(frozen=True, slots=True)
class ResourceRequest:
    """One allocation-candidates query. ``groups`` holds the unsuffixed group first, if any."""

    groups: tuple[RequestGroup, ...] = ()
    group_policy: str | None = None
    limit: int | None = 1000
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtree: tuple[tuple[str, ...], ...] = ()
    cpu_pinning_requested: bool = False
    suffixed_groups_from_flavor: int = 0

    def get_group(self, suffix: str | None) -> RequestGroup | None:
        for group in self.groups:
            if group.requester_id == suffix:
                return group
        return None

    @property
    def num_suffixed_groups(self) -> int:
        return sum(1 for g in self.groups if g.requester_id)

    @property
    def all_required_traits(self) -> frozenset[str]:
        out: set[str] = set()
        for g in self.groups:
            out |= g.required_traits
        return frozenset(out)

    def merged_resources(self) -> dict[str, int]:
        """Amount per resource class summed over every group."""
        out: dict[str, int] = {}
        for g in self.groups:
            for rc, amount in g.resources.items():
                out[rc] = out.get(rc, 0) + amount
        return out

    def to_params(self) -> list[tuple[str, str]]:
        """The sorted (key, value) pairs nova's to_querystring() urlencodes."""
        params: list[tuple[str, str]] = []
        if self.limit is not None:
            params.append(("limit", str(self.limit)))
        if self.group_policy is not None:
            params.append(("group_policy", self.group_policy))
        if self.root_required or self.root_forbidden:
            vals = sorted(self.root_required) + ["!" + t for t in sorted(self.root_forbidden)]
            params.append(("root_required", ",".join(vals)))
        for suffixes in self.same_subtree:
            params.append(("same_subtree", ",".join(sorted(suffixes))))
        for g in self.groups:
            params.extend(group_queryparams(g))
        params.sort()
        return params

    def to_querystring(self) -> str:
        """Sorted, urlencoded, as nova's ResourceRequest.to_querystring()."""
        return urlencode(self.to_params())


def group_queryparams(g: RequestGroup) -> list[tuple[str, str]]:
    """nova's RequestGroup.to_queryparams()."""
    suffix = g.requester_id or ""
    out = [(f"resources{suffix}", ",".join(sorted(f"{rc}:{n}" for rc, n in g.resources.items())))]
    required = ",".join(sorted(g.required_traits) + ["!" + t for t in sorted(g.forbidden_traits)])
    if required:
        out.append((f"required{suffix}", required))
    if g.aggregates:
        out.extend(
            sorted((f"member_of{suffix}", "in:" + ",".join(sorted(a))) for a in g.aggregates)
        )
    if g.in_tree:
        out.append((f"in_tree{suffix}", g.in_tree))
    if g.forbidden_aggregates:
        out.append((f"member_of{suffix}", "!in:" + ",".join(sorted(g.forbidden_aggregates))))
    return out


@dataclass(slots=True)
class _Group:
    """Mutable working copy of a RequestGroup while the query is assembled."""

    requester_id: str | None
    use_same_provider: bool
    resources: dict[str, int] = field(default_factory=dict)
    required: set[str] = field(default_factory=set)
    forbidden: set[str] = field(default_factory=set)
    aggregates: list[tuple[str, ...]] = field(default_factory=list)
    forbidden_aggregates: set[str] = field(default_factory=set)
    in_tree: str | None = None
    provider_uuids: tuple[str, ...] = ()

    @classmethod
    def of(cls, g: RequestGroup) -> _Group:
        return cls(
            requester_id=g.requester_id,
            use_same_provider=g.use_same_provider,
            resources=dict(g.resources),
            required=set(g.required_traits),
            forbidden=set(g.forbidden_traits),
            aggregates=list(g.aggregates),
            forbidden_aggregates=set(g.forbidden_aggregates),
            in_tree=g.in_tree,
            provider_uuids=g.provider_uuids,
        )

    def add_resource(self, rc: str, amount: str | int) -> None:
        if not is_valid_resource_class(rc):
            LOG.warning("Received an invalid ResourceClass '%s' in extra_specs.", rc)
            return
        try:
            value = int(amount)
            if value < 0:
                raise ValueError
        except (TypeError, ValueError):
            LOG.warning("Resource amounts must be nonnegative integers. Received '%s'", amount)
            return
        self.resources[rc] = value

    def add_trait(self, trait: str, kind: str) -> None:
        if kind == "required":
            self.required.add(trait)
        elif kind == "forbidden":
            self.forbidden.add(trait)
        else:
            LOG.warning("Only (required, forbidden) traits are supported. Received '%s'.", kind)

    def is_empty(self) -> bool:
        return not (
            self.resources
            or self.required
            or self.forbidden
            or self.aggregates
            or self.forbidden_aggregates
        )

    def freeze(self) -> RequestGroup:
        return RequestGroup(
            use_same_provider=self.use_same_provider,
            resources=dict(self.resources),
            required_traits=frozenset(self.required),
            forbidden_traits=frozenset(self.forbidden),
            aggregates=tuple(self.aggregates),
            forbidden_aggregates=frozenset(self.forbidden_aggregates),
            requester_id=self.requester_id,
            provider_uuids=self.provider_uuids,
            in_tree=self.in_tree,
        )


class _Builder:
    """nova's ResourceRequest while it is being filled in."""

    def __init__(self, limit: int | None) -> None:
        self.groups: dict[str | None, _Group] = {}
        self.group_policy: str | None = None
        self.limit = limit
        self.cpu_pinning_requested = False
        self.suffixed_from_flavor = 0

    def group(self, ident: str | None) -> _Group:
        g = self.groups.get(ident)
        if g is None:
            g = self.groups[ident] = _Group(requester_id=ident, use_same_provider=bool(ident))
        return g

    def add_resource(self, rc: str, amount: str | int, group: str | None = None) -> None:
        self.group(group).add_resource(rc, amount)

    def add_trait(self, trait: str, kind: str, group: str | None = None) -> None:
        self.group(group).add_trait(trait, kind)

    def num_suffixed(self) -> int:
        return sum(1 for ident in self.groups if ident is not None)

    def merged_resources(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for g in self.groups.values():
            for rc, n in g.resources.items():
                out[rc] = out.get(rc, 0) + n
        return out

    def add_request_group(self, rg: RequestGroup) -> None:
        if not rg.requester_id:
            raise ValueError(f"Missing requester_id in RequestGroup {rg}")
        g = _Group.of(rg)
        if g.is_empty():
            raise ValueError(f"Refusing to add no-op RequestGroup {rg.requester_id}")
        if rg.requester_id in self.groups:
            raise RequestGroupSuffixConflict(rg.requester_id)
        self.groups[rg.requester_id] = g

    def strip_zeros(self) -> None:
        for ident, g in list(self.groups.items()):
            g.resources = {rc: n for rc, n in g.resources.items() if n != 0}
            if g.is_empty():
                del self.groups[ident]

    # ---- translations of flavor/image into resources and traits ----

    def extra_specs(self, flavor: Flavor) -> None:
        for key, val in flavor.extra_specs.items():
            if key == "group_policy":
                if val in ("none", "isolate"):
                    self.group_policy = val
                else:
                    LOG.warning(
                        "Invalid group_policy '%s'. Valid values are 'none' and 'isolate'.", val
                    )
                continue
            m = EXTRA_SPEC_KEY.match(key)
            if not m:
                continue
            prefix, suffix, name = m.groups()
            if prefix == "resources":
                self.add_resource(name, val, group=suffix)
            else:
                self.add_trait(name, val, group=suffix)

    def pinning(self, flavor: Flavor, props: ImageMetaProps) -> None:
        policy = hw.cpu_policy(flavor, props)
        thread_policy = hw.cpu_thread_policy(flavor, props)
        emul = hw.emulator_threads_policy(flavor)
        pcpus = 0
        if policy == "dedicated":
            self.cpu_pinning_requested = True
            pcpus = flavor.vcpus
        if policy == "mixed":
            dedicated = hw.dedicated_cpus(flavor) or hw.realtime_cpus(flavor, props) or set()
            pcpus = len(dedicated)
            self.add_resource("VCPU", flavor.vcpus - pcpus)
        if policy in ("dedicated", "mixed"):
            if emul == "isolate":
                pcpus += 1
            self.add_resource("PCPU", pcpus)
        kind = {"isolate": "forbidden", "require": "required"}.get(thread_policy or "")
        if kind:
            self.add_trait(HW_CPU_HYPERTHREADING, kind)

    def extras(self, flavor: Flavor, props: ImageMetaProps) -> None:
        me_trait = hw.mem_encryption_trait(flavor, props)
        if me_trait:
            self.add_resource("MEM_ENCRYPTION_CONTEXT", 1)
            self.add_trait(me_trait, "required")
        counts: dict[str, int] = {}
        for label in hw.vpmem_labels(flavor):
            rc = _normalize_rc("PMEM_NAMESPACE_" + label)
            counts[rc] = counts.get(rc, 0) + 1
        for rc, n in counts.items():
            self.add_resource(rc, n)
        vtpm = hw.vtpm(flavor, props)
        if vtpm is not None:
            model = (
                "COMPUTE_SECURITY_TPM_CRB"
                if vtpm.model == "tpm-crb"
                else "COMPUTE_SECURITY_TPM_TIS"
            )
            version = (
                "COMPUTE_SECURITY_TPM_2_0" if vtpm.version == "2.0" else "COMPUTE_SECURITY_TPM_1_2"
            )
            self.add_trait(model, "required")
            self.add_trait(version, "required")
        if hw.pci_numa_policy(flavor, props) == "socket":
            self.add_trait("COMPUTE_SOCKET_PCI_NUMA_AFFINITY", "required")
        if hw.secure_boot(flavor, props) == "required":
            self.add_trait("COMPUTE_SECURITY_UEFI_SECURE_BOOT", "required")
        mode = hw.maxphysaddr_mode(flavor, props)
        if mode == "passthrough":
            self.add_trait("COMPUTE_ADDRESS_SPACE_PASSTHROUGH", "required")
        elif mode == "emulate":
            self.add_trait("COMPUTE_ADDRESS_SPACE_EMULATED", "required")
        if hw.stateless_firmware(props):
            self.add_trait("COMPUTE_SECURITY_STATELESS_FIRMWARE", "required")


def _normalize_rc(name: str) -> str:
    """os_resource_classes.normalize_name: CUSTOM_ + upper-cased, non-alnum -> '_'."""
    norm = re.sub("[^0-9A-Z]+", "_", name.upper())
    return "CUSTOM_" + norm


def _from_spec(spec: RequestSpec, limit: int | None, enable_pinning_translate: bool) -> _Builder:
    b = _Builder(limit)
    flavor = spec.flavor
    props = spec.image_props
    b.extra_specs(flavor)
    b.suffixed_from_flavor = b.num_suffixed()
    for trait in sorted(props.traits_required):
        b.add_trait(trait, "required")
    if enable_pinning_translate:
        b.pinning(flavor, props)
    for rg in spec.requested_resources:
        b.add_request_group(rg)
    merged = b.merged_resources()
    if "VCPU" not in merged and "PCPU" not in merged:
        b.add_resource("VCPU", flavor.vcpus)
    if "MEMORY_MB" not in merged:
        b.add_resource("MEMORY_MB", flavor.memory_mb)
    if "DISK_GB" not in merged:
        disk = flavor.ephemeral_gb + math.ceil(flavor.swap / 1024)
        if not spec.is_bfv:
            disk += flavor.root_gb
        if disk:
            b.add_resource("DISK_GB", disk)
    b.extras(flavor, props)
    b.strip_zeros()
    return b


def _freeze(b: _Builder, spec: RequestSpec) -> ResourceRequest:
    groups = sorted(
        b.groups.values(), key=lambda g: (g.requester_id is not None, g.requester_id or "")
    )
    rlp = spec.request_level_params
    return ResourceRequest(
        groups=tuple(g.freeze() for g in groups),
        group_policy=b.group_policy,
        limit=b.limit,
        root_required=rlp.root_required,
        root_forbidden=rlp.root_forbidden,
        same_subtree=rlp.same_subtree,
        cpu_pinning_requested=b.cpu_pinning_requested,
        suffixed_groups_from_flavor=b.suffixed_from_flavor,
    )


def from_request_spec(
    spec: RequestSpec, *, limit: int | None = 1000, enable_pinning_translate: bool = True
) -> ResourceRequest:
    """nova's ResourceRequest.from_request_spec (no destination/hint handling)."""
    return _freeze(_from_spec(spec, limit, enable_pinning_translate), spec)


def build_resource_request(
    spec: RequestSpec,
    config: Config,
    *,
    enable_pinning_translate: bool = True,
    nodes_for: Callable[[str | None, str | None], Sequence[str]] | None = None,
) -> ResourceRequest:
    """nova's resources_from_request_spec: the query for one select_destinations call.

    ``nodes_for(host, node)`` returns the compute-node uuids of a forced/requested host (from
    the host-state cache). Raises NoValidHost for an unknown host and for a malformed spec.
    """
    try:
        b = _from_spec(spec, config.scheduler.max_placement_results, enable_pinning_translate)
    except (RequestGroupSuffixConflict, ValueError) as exc:
        raise NoValidHost(reason=str(exc)) from exc
    target_host: str | None = None
    target_node: str | None = None
    dest = spec.requested_destination
    if dest is not None:
        target_host, target_node = dest.host, dest.node
        if dest.aggregates:
            b.group(None).aggregates = [tuple(ored.split(",")) for ored in dest.aggregates]
        if dest.forbidden_aggregates:
            b.group(None).forbidden_aggregates |= set(dest.forbidden_aggregates)
    if spec.force_hosts:
        target_host = target_host or spec.force_hosts[0]
    if spec.force_nodes:
        target_node = target_node or spec.force_nodes[0]
    if target_host or target_node:
        nodes = list(nodes_for(target_host, target_node)) if nodes_for is not None else []
        if not nodes:
            raise NoValidHost(reason=f"No such host - host: {target_host} node: {target_node} ")
        if len(nodes) == 1:
            b.group(None).in_tree = nodes[0]
        else:
            b.limit = None
    if any(key in NO_LIMIT_HINTS for key in spec.scheduler_hints):
        b.limit = None
    if b.num_suffixed() >= 2 and not b.group_policy:
        LOG.warning(
            "More than one numbered request group in the allocation candidate query but the "
            "flavor specifies no group_policy."
        )
        if b.suffixed_from_flavor <= 1:
            b.group_policy = "none"
    return _freeze(b, spec)
