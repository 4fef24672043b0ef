"""PCI passthrough accounting (nova's PciDeviceStats), on immutable host pools."""

from asyncsched.resources.pci.stats import (
    PciCheck,
    PciRequestFailed,
    candidate_pci_key,
    pci_apply_requests,
    pci_check_requests,
    pci_support_requests,
)

__all__ = [
    "PciCheck",
    "PciRequestFailed",
    "candidate_pci_key",
    "pci_apply_requests",
    "pci_check_requests",
    "pci_support_requests",
]
