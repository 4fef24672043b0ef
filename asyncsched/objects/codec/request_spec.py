"""RequestSpec 1.x primitives (and the objects it carries) -> :class:`RequestSpec`."""

from __future__ import annotations

import json
from typing import Any

from asyncsched.objects.codec.image import decode_image
from asyncsched.objects.codec.limits import decode_limits, decode_network_metadata
from asyncsched.objects.codec.primitives import (
    CodecError,
    as_dict,
    as_int,
    as_list,
    as_str,
    check_depth,
    field,
    int_set,
    object_items,
    opt_bool,
    opt_float,
    opt_int,
    opt_str,
    opt_str_tuple,
    required,
    str_dict,
    str_set,
    str_tuple,
    unwrap,
    wrap,
)
from asyncsched.objects.models import (
    CellMapping,
    Destination,
    Flavor,
    InstanceGroup,
    InstanceNUMACell,
    InstanceNUMATopology,
    InstancePCIRequest,
    InstancePCIRequests,
    NetworkRequest,
    RequestGroup,
    RequestLevelParams,
    RequestSpec,
    SchedulerRetries,
    VirtCPUTopology,
)


def decode_flavor(value: Any, path: str = "flavor") -> Flavor:
    d = unwrap(value, path, "Flavor")
    return Flavor(
        memory_mb=required(d, "memory_mb", path, as_int),
        vcpus=required(d, "vcpus", path, as_int),
        root_gb=field(d, "root_gb", path, as_int, 0),
        ephemeral_gb=field(d, "ephemeral_gb", path, as_int, 0),
        swap=field(d, "swap", path, as_int, 0),
        flavorid=field(d, "flavorid", path, opt_str, None) or "",
        id=field(d, "id", path, opt_int, None),
        name=field(d, "name", path, opt_str, None),
        rxtx_factor=field(d, "rxtx_factor", path, opt_float, None) or 1.0,
        vcpu_weight=field(d, "vcpu_weight", path, opt_int, None),
        disabled=field(d, "disabled", path, opt_bool, None) or False,
        is_public=field(d, "is_public", path, opt_bool, None) is not False,
        extra_specs=field(d, "extra_specs", path, str_dict, {}),
        description=field(d, "description", path, opt_str, None),
    )


def _decode_cpu_topology(value: Any, path: str) -> VirtCPUTopology | None:
    if value is None:
        return None
    d = unwrap(value, path, "VirtCPUTopology")
    return VirtCPUTopology(
        sockets=field(d, "sockets", path, as_int, 1),
        cores=field(d, "cores", path, as_int, 1),
        threads=field(d, "threads", path, as_int, 1),
    )


def _decode_pinning(value: Any, path: str) -> dict[int, int] | None:
    if value is None:
        return None
    return {as_int(k, path): as_int(v, f"{path}.{k}") for k, v in as_dict(value, path).items()}


def decode_numa_cell(value: Any, path: str) -> InstanceNUMACell:
    d = unwrap(value, path, "InstanceNUMACell")
    reserved = d.get("cpuset_reserved")
    return InstanceNUMACell(
        id=field(d, "id", path, as_int, 0),
        cpuset=field(d, "cpuset", path, int_set, frozenset()),
        pcpuset=field(d, "pcpuset", path, int_set, frozenset()),
        memory=field(d, "memory", path, as_int, 0),
        pagesize=field(d, "pagesize", path, opt_int, None),
        cpuset_reserved=None if reserved is None else int_set(reserved, f"{path}.cpuset_reserved"),
        cpu_topology=_decode_cpu_topology(d.get("cpu_topology"), f"{path}.cpu_topology"),
        cpu_pinning=_decode_pinning(d.get("cpu_pinning_raw"), f"{path}.cpu_pinning_raw"),
        cpu_policy=field(d, "cpu_policy", path, opt_str, None),
        cpu_thread_policy=field(d, "cpu_thread_policy", path, opt_str, None),
    )


def decode_numa_topology(value: Any, path: str = "numa_topology") -> InstanceNUMATopology | None:
    if value is None:
        return None
    d = unwrap(value, path, "InstanceNUMATopology")
    cells = as_list(d.get("cells") or [], f"{path}.cells")
    return InstanceNUMATopology(
        cells=tuple(decode_numa_cell(c, f"{path}.cells[{i}]") for i, c in enumerate(cells)),
        instance_uuid=field(d, "instance_uuid", path, opt_str, None),
        emulator_threads_policy=field(d, "emulator_threads_policy", path, opt_str, None),
    )


def decode_pci_requests(value: Any, path: str = "pci_requests") -> InstancePCIRequests | None:
    if value is None:
        return None
    d = unwrap(value, path, "InstancePCIRequests")
    reqs = []
    for i, item in enumerate(as_list(d.get("requests") or [], f"{path}.requests")):
        p = f"{path}.requests[{i}]"
        r = unwrap(item, p, "InstancePCIRequest")
        specs = as_list(r.get("spec") or [], f"{p}.spec")
        reqs.append(
            InstancePCIRequest(
                count=field(r, "count", p, as_int, 1),
                spec=tuple(str_dict(s, f"{p}.spec[{j}]") for j, s in enumerate(specs)),
                alias_name=field(r, "alias_name", p, opt_str, None),
                is_new=field(r, "is_new", p, opt_bool, None) or False,
                request_id=field(r, "request_id", p, opt_str, None),
                requester_id=field(r, "requester_id", p, opt_str, None),
                numa_policy=field(r, "numa_policy", p, opt_str, None),
            )
        )
    return InstancePCIRequests(
        requests=tuple(reqs), instance_uuid=field(d, "instance_uuid", path, opt_str, None)
    )


def decode_instance_group(value: Any, path: str = "instance_group") -> InstanceGroup | None:
    if value is None:
        return None
    d = unwrap(value, path, "InstanceGroup")
    policy = field(d, "policy", path, opt_str, None)
    policies = str_tuple(d.get("policies") or [], f"{path}.policies")
    if policy is None and policies:
        policy = policies[0]
    if not policies and policy is not None:
        policies = (policy,)
    rules_key = "_rules" if "_rules" in d else "rules"
    return InstanceGroup(
        uuid=required(d, "uuid", path, as_str),
        id=field(d, "id", path, opt_int, None),
        name=field(d, "name", path, opt_str, None),
        user_id=field(d, "user_id", path, opt_str, None),
        project_id=field(d, "project_id", path, opt_str, None),
        policy=policy,
        policies=policies,
        members=str_tuple(d.get("members") or [], f"{path}.members"),
        hosts=str_tuple(d.get("hosts") or [], f"{path}.hosts"),
        rules=field(d, rules_key, path, str_dict, {}),
    )


def decode_cell_mapping(value: Any, path: str) -> CellMapping | None:
    if value is None:
        return None
    d = unwrap(value, path, "CellMapping")
    return CellMapping(
        uuid=required(d, "uuid", path, as_str),
        name=field(d, "name", path, opt_str, None),
        id=field(d, "id", path, opt_int, None),
        disabled=field(d, "disabled", path, opt_bool, None) or False,
    )


def decode_destination(value: Any, path: str = "requested_destination") -> Destination | None:
    if value is None:
        return None
    d = unwrap(value, path, "Destination")
    return Destination(
        host=field(d, "host", path, opt_str, None),
        node=field(d, "node", path, opt_str, None),
        cell=decode_cell_mapping(d.get("cell"), f"{path}.cell"),
        aggregates=str_tuple(d.get("aggregates") or [], f"{path}.aggregates"),
        forbidden_aggregates=field(d, "forbidden_aggregates", path, str_set, frozenset()),
        allow_cross_cell_move=field(d, "allow_cross_cell_move", path, opt_bool, None) or False,
    )


def decode_retry(value: Any, path: str = "retry") -> SchedulerRetries | None:
    if value is None:
        return None
    d = unwrap(value, path, "SchedulerRetries")
    hosts = []
    for i, node in enumerate(object_items(d.get("hosts"), f"{path}.hosts", "ComputeNodeList")):
        p = f"{path}.hosts[{i}]"
        n = unwrap(node, p, "ComputeNode")
        hosts.append(
            (
                field(n, "host", p, opt_str, None) or "",
                field(n, "hypervisor_hostname", p, opt_str, None) or "",
            )
        )
    return SchedulerRetries(
        num_attempts=field(d, "num_attempts", path, as_int, 0), hosts=tuple(hosts)
    )


def _aggregate_lists(value: Any, path: str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ()
    return tuple(str_tuple(v, f"{path}[{i}]") for i, v in enumerate(as_list(value, path)))


def decode_request_group(value: Any, path: str) -> RequestGroup:
    d = unwrap(value, path, "RequestGroup")
    resources = {
        k: as_int(v, f"{path}.resources.{k}")
        for k, v in as_dict(d.get("resources") or {}, f"{path}.resources").items()
    }
    return RequestGroup(
        use_same_provider=field(d, "use_same_provider", path, opt_bool, None) is not False,
        resources=resources,
        required_traits=field(d, "required_traits", path, str_set, frozenset()),
        forbidden_traits=field(d, "forbidden_traits", path, str_set, frozenset()),
        aggregates=field(d, "aggregates", path, _aggregate_lists, ()),
        forbidden_aggregates=field(d, "forbidden_aggregates", path, str_set, frozenset()),
        requester_id=field(d, "requester_id", path, opt_str, None),
        provider_uuids=str_tuple(d.get("provider_uuids") or [], f"{path}.provider_uuids"),
        in_tree=field(d, "in_tree", path, opt_str, None),
    )


def decode_request_level_params(
    value: Any, path: str = "request_level_params"
) -> RequestLevelParams:
    if value is None:
        return RequestLevelParams()
    d = unwrap(value, path, "RequestLevelParams")
    return RequestLevelParams(
        root_required=field(d, "root_required", path, str_set, frozenset()),
        root_forbidden=field(d, "root_forbidden", path, str_set, frozenset()),
        same_subtree=field(d, "same_subtree", path, _aggregate_lists, ()),
    )


def _decode_security_groups(value: Any, path: str) -> tuple[str, ...]:
    names = []
    for i, item in enumerate(object_items(value, path, "SecurityGroupList")):
        p = f"{path}[{i}]"
        if isinstance(item, str):
            names.append(item)
            continue
        g = unwrap(item, p, "SecurityGroup")
        name = field(g, "name", p, opt_str, None)
        if name is not None:
            names.append(name)
    return tuple(names)


def _decode_networks(value: Any, path: str) -> tuple[NetworkRequest, ...]:
    out = []
    for i, item in enumerate(object_items(value, path, "NetworkRequestList")):
        p = f"{path}[{i}]"
        n = unwrap(item, p, "NetworkRequest")
        out.append(
            NetworkRequest(
                network_id=field(n, "network_id", p, opt_str, None),
                address=field(n, "address", p, opt_str, None),
                port_id=field(n, "port_id", p, opt_str, None),
                pci_request_id=field(n, "pci_request_id", p, opt_str, None),
                tag=field(n, "tag", p, opt_str, None),
                arq_uuid=field(n, "arq_uuid", p, opt_str, None),
                device_profile=field(n, "device_profile", p, opt_str, None),
            )
        )
    return tuple(out)


def decode_hints(value: Any, path: str) -> dict[str, tuple[str, ...]]:
    """nova's DictOfListOfStrings: scalars are wrapped in a list, values coerced to str."""
    if value is None:
        return {}
    out: dict[str, tuple[str, ...]] = {}
    for key, val in as_dict(value, path).items():
        if val is None:
            continue
        items = val if isinstance(val, list | tuple) else [val]
        out[key] = tuple(
            v if isinstance(v, str) else json.dumps(v) if isinstance(v, dict | list) else str(v)
            for v in items
        )
    return out


def decode_request_spec(
    value: Any, path: str = "spec_obj", *, nesting_checked: bool = False
) -> RequestSpec:
    """A RequestSpec primitive (any 1.x) -> :class:`RequestSpec` with nova's defaults.

    ``nesting_checked``: the caller bounded the nesting of a message holding ``value`` more
    tightly already (``rpc/validation.check_message``), so it is not walked again here."""
    if not nesting_checked:
        check_depth(value, path)
    d = unwrap(value, path, "RequestSpec")
    if "flavor" not in d or d["flavor"] is None:
        raise CodecError(f"{path}.flavor", "required field is missing")
    groups = as_list(d.get("requested_resources") or [], f"{path}.requested_resources")
    return RequestSpec(
        flavor=decode_flavor(d["flavor"], f"{path}.flavor"),
        id=field(d, "id", path, opt_int, None),
        image=None if d.get("image") is None else decode_image(d["image"], f"{path}.image"),
        numa_topology=decode_numa_topology(d.get("numa_topology"), f"{path}.numa_topology"),
        pci_requests=decode_pci_requests(d.get("pci_requests"), f"{path}.pci_requests"),
        project_id=field(d, "project_id", path, opt_str, None),
        user_id=field(d, "user_id", path, opt_str, None),
        availability_zone=field(d, "availability_zone", path, opt_str, None),
        num_instances=field(d, "num_instances", path, opt_int, None) or 1,
        ignore_hosts=field(d, "ignore_hosts", path, opt_str_tuple, None),
        force_hosts=field(d, "force_hosts", path, opt_str_tuple, None),
        force_nodes=field(d, "force_nodes", path, opt_str_tuple, None),
        requested_destination=decode_destination(
            d.get("requested_destination"), f"{path}.requested_destination"
        ),
        retry=decode_retry(d.get("retry"), f"{path}.retry"),
        limits=decode_limits(d.get("limits"), f"{path}.limits"),
        instance_group=decode_instance_group(d.get("instance_group"), f"{path}.instance_group"),
        scheduler_hints=decode_hints(d.get("scheduler_hints"), f"{path}.scheduler_hints"),
        instance_uuid=field(d, "instance_uuid", path, opt_str, None),
        security_groups=_decode_security_groups(
            d.get("security_groups"), f"{path}.security_groups"
        ),
        network_metadata=decode_network_metadata(
            d.get("network_metadata"), f"{path}.network_metadata"
        ),
        is_bfv=field(d, "is_bfv", path, opt_bool, None) or False,
        requested_resources=tuple(
            decode_request_group(g, f"{path}.requested_resources[{i}]")
            for i, g in enumerate(groups)
        ),
        request_level_params=decode_request_level_params(
            d.get("request_level_params"), f"{path}.request_level_params"
        ),
        requested_networks=_decode_networks(
            d.get("requested_networks"), f"{path}.requested_networks"
        ),
    )


def encode_flavor(f: Flavor) -> dict[str, Any]:
    """Flavor primitive, every field but projects (notifications, tests)."""
    return wrap(
        "Flavor",
        {
            "id": f.id,
            "name": f.name,
            "memory_mb": f.memory_mb,
            "vcpus": f.vcpus,
            "root_gb": f.root_gb,
            "ephemeral_gb": f.ephemeral_gb,
            "flavorid": f.flavorid,
            "swap": f.swap,
            "rxtx_factor": f.rxtx_factor,
            "vcpu_weight": f.vcpu_weight,
            "disabled": f.disabled,
            "is_public": f.is_public,
            "extra_specs": dict(f.extra_specs),
            "description": f.description,
        },
    )
