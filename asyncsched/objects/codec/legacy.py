"""The pre-4.3 ``request_spec`` + ``filter_properties`` dict pair -> :class:`RequestSpec`."""

from __future__ import annotations

from typing import Any

from asyncsched.objects.codec.image import decode_glance_image
from asyncsched.objects.codec.limits import decode_limits
from asyncsched.objects.codec.primitives import (
    CodecError,
    as_dict,
    as_int,
    as_list,
    check_depth,
    field,
    opt_int,
    opt_str,
    opt_str_tuple,
    str_tuple,
)
from asyncsched.objects.codec.request_spec import (
    decode_flavor,
    decode_hints,
    decode_numa_topology,
    decode_pci_requests,
)
from asyncsched.objects.models import (
    InstanceGroup,
    RequestSpec,
    SchedulerLimits,
    SchedulerRetries,
)


def request_spec_from_legacy(
    request_spec: Any,
    filter_properties: Any,
    path: str = "request_spec",
    *,
    nesting_checked: bool = False,
) -> RequestSpec:
    """nova's ``RequestSpec.from_primitives``: the pre-4.3 dict pair -> :class:`RequestSpec`.

    ``request_spec`` carries image, instance_type (the flavor), instance_properties (project,
    user, availability_zone, numa_topology, pci_requests, uuid) and num_instances;
    ``filter_properties`` carries scheduler_hints, group_*, force_*/ignore_hosts, retry, limits
    and pci_requests. ``nesting_checked`` as for ``decode_request_spec``.
    """
    if not nesting_checked:
        check_depth(request_spec, path)
        check_depth(filter_properties, "filter_properties")
    spec = as_dict(request_spec, path)
    fp = as_dict(filter_properties if filter_properties is not None else {}, "filter_properties")
    flavor_raw = spec.get("instance_type") or fp.get("instance_type")
    if flavor_raw is None:
        raise CodecError(f"{path}.instance_type", "required field is missing")
    flavor = decode_flavor(flavor_raw, f"{path}.instance_type")
    props = as_dict(spec.get("instance_properties") or {}, f"{path}.instance_properties")
    pp = f"{path}.instance_properties"

    group: InstanceGroup | None = None
    hints = decode_hints(fp.get("scheduler_hints"), "filter_properties.scheduler_hints")
    if fp.get("group_updated") or fp.get("group_policies") or fp.get("group_hosts"):
        policies = opt_str_tuple(fp.get("group_policies"), "filter_properties.group_policies")
        group_uuid = hints.get("group", ("",))[0]
        group = InstanceGroup(
            uuid=group_uuid,
            policy=policies[0] if policies else None,
            policies=policies or (),
            hosts=opt_str_tuple(fp.get("group_hosts"), "filter_properties.group_hosts") or (),
            members=opt_str_tuple(fp.get("group_members"), "filter_properties.group_members") or (),
        )

    retry: SchedulerRetries | None = None
    raw_retry = fp.get("retry")
    if raw_retry is not None:
        r = as_dict(raw_retry, "filter_properties.retry")
        hosts = []
        for i, pair in enumerate(as_list(r.get("hosts") or [], "filter_properties.retry.hosts")):
            hp = str_tuple(pair, f"filter_properties.retry.hosts[{i}]")
            if len(hp) >= 2:
                hosts.append((hp[0], hp[1]))
        retry = SchedulerRetries(
            num_attempts=as_int(r.get("num_attempts", 0), "filter_properties.retry.num_attempts"),
            hosts=tuple(hosts),
        )

    limits: SchedulerLimits | None = None
    raw_limits = fp.get("limits")
    if raw_limits is not None:
        ld = as_dict(raw_limits, "filter_properties.limits")
        limits = decode_limits(ld, "filter_properties.limits")

    pci_raw = props.get("pci_requests") or fp.get("pci_requests")
    return RequestSpec(
        flavor=flavor,
        image=decode_glance_image(spec.get("image"), f"{path}.image"),
        numa_topology=decode_numa_topology(props.get("numa_topology"), f"{pp}.numa_topology"),
        pci_requests=decode_pci_requests(pci_raw, f"{pp}.pci_requests"),
        project_id=field(props, "project_id", pp, opt_str, None),
        user_id=field(props, "user_id", pp, opt_str, None),
        availability_zone=field(props, "availability_zone", pp, opt_str, None),
        num_instances=opt_int(spec.get("num_instances"), f"{path}.num_instances") or 1,
        ignore_hosts=opt_str_tuple(fp.get("ignore_hosts"), "filter_properties.ignore_hosts"),
        force_hosts=opt_str_tuple(fp.get("force_hosts"), "filter_properties.force_hosts"),
        force_nodes=opt_str_tuple(fp.get("force_nodes"), "filter_properties.force_nodes"),
        retry=retry,
        limits=limits,
        instance_group=group,
        scheduler_hints=hints,
        instance_uuid=field(props, "uuid", pp, opt_str, None),
    )
