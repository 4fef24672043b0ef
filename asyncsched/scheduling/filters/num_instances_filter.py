"""NumInstancesFilter: fewer than max_instances_per_host instances."""

from __future__ import annotations

from asyncsched.scheduling.filters.host_limit import HostLimitFilter


class NumInstancesFilter(HostLimitFilter):
    name = "NumInstancesFilter"
    counter = "num_instances"
    option = "max_instances_per_host"
    reason = "num-instances"
