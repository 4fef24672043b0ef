"""NUMA topology fitting, usage bookkeeping and consume (nova's nova/virt/hardware.py parts)."""

from asyncsched.resources.numa.consume import consume_numa_pci
from asyncsched.resources.numa.fit import (
    MEMPAGES_ANY,
    MEMPAGES_LARGE,
    MEMPAGES_SMALL,
    FitResult,
    numa_fit_instance_to_host,
)
from asyncsched.resources.numa.usage import numa_usage_from_instance

__all__ = [
    "MEMPAGES_ANY",
    "MEMPAGES_LARGE",
    "MEMPAGES_SMALL",
    "FitResult",
    "consume_numa_pci",
    "numa_fit_instance_to_host",
    "numa_usage_from_instance",
]
