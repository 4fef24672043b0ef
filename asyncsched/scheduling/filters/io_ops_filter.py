"""IoOpsFilter: fewer than max_io_ops_per_host concurrent I/O-heavy tasks."""

from __future__ import annotations

from asyncsched.scheduling.filters.host_limit import HostLimitFilter


class IoOpsFilter(HostLimitFilter):
    name = "IoOpsFilter"
    counter = "num_io_ops"
    option = "max_io_ops_per_host"
    reason = "io-ops"
