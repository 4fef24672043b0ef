"""A compute node row as the state tests build it: ``snap(uuid, host)`` in one cell."""

from __future__ import annotations

from asyncsched.state.rows import NodeSnapshot

CELL = "cell-1"


def snap(uuid: str, host: str, free_ram_mb: int = 1000) -> NodeSnapshot:
    return NodeSnapshot(
        uuid=uuid,
        host=host,
        nodename=uuid,
        cell_uuid=CELL,
        compute_node_id=1,
        total_usable_ram_mb=2000,
        free_ram_mb=free_ram_mb,
        total_usable_disk_gb=10,
        disk_mb_used=0,
        free_disk_mb=10240,
        vcpus_total=8,
        vcpus_used=0,
        raw_cpu_allocation_ratio=None,
        raw_ram_allocation_ratio=None,
        raw_disk_allocation_ratio=None,
        num_instances=0,
        num_io_ops=0,
        failed_builds=0,
    )
