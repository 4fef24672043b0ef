"""Names from os-traits and os-resource-classes that the query builder and pre-filters need.

os-traits / os-resource-classes are not runtime dependencies of asyncsched, so the subsets nova
validates against are kept here; a unit test checks them against the installed libraries.
"""

from __future__ import annotations

OWNER_NOVA = "OWNER_NOVA"
COMPUTE_STATUS_DISABLED = "COMPUTE_STATUS_DISABLED"
HW_CPU_HYPERTHREADING = "HW_CPU_HYPERTHREADING"

CUSTOM_NAMESPACE = "CUSTOM_"

#: os_resource_classes.STANDARDS
STANDARD_RESOURCE_CLASSES: frozenset[str] = frozenset(
    {
        "VCPU",
        "MEMORY_MB",
        "DISK_GB",
        "PCI_DEVICE",
        "SRIOV_NET_VF",
        "NUMA_SOCKET",
        "NUMA_CORE",
        "NUMA_THREAD",
        "NUMA_MEMORY_MB",
        "IPV4_ADDRESS",
        "VGPU",
        "VGPU_DISPLAY_HEAD",
        "NET_BW_EGR_KILOBIT_PER_SEC",
        "NET_BW_IGR_KILOBIT_PER_SEC",
        "PCPU",
        "MEM_ENCRYPTION_CONTEXT",
        "FPGA",
        "PGPU",
        "NET_PACKET_RATE_KILOPACKET_PER_SEC",
        "NET_PACKET_RATE_EGR_KILOPACKET_PER_SEC",
        "NET_PACKET_RATE_IGR_KILOPACKET_PER_SEC",
    }
)

#: The os-traits names nova's image pre-filters may compute (checked with hasattr(os_traits, X)).
KNOWN_TRAITS: frozenset[str] = frozenset(
    [f"COMPUTE_STORAGE_BUS_{b}" for b in "FDC IDE LXC SATA SCSI UML USB VIRTIO XEN".split()]
    + [
        f"COMPUTE_GRAPHICS_MODEL_{m}"
        for m in "BOCHS CIRRUS GOP NONE QXL VGA VIRTIO VMVGA XEN".split()
    ]
    + [
        f"COMPUTE_NET_VIF_MODEL_{m}"
        for m in (
            "E1000 E1000E IGB LAN9118 NE2K_PCI NETFRONT PCNET RTL8139 SPAPR_VLAN SRIOV VIRTIO "
            "VMXNET VMXNET3"
        ).split()
    ]
    + [
        f"HW_ARCH_{a}"
        for a in (
            "AARCH64 ALPHA ARMV6 ARMV7 ARMV7B CRIS I686 IA64 LM32 M68K MICROBLAZE MICROBLAZEEL "
            "MIPS MIPS64 MIPS64EL MIPSEL OPENRISC PARISC PARISC64 PPC PPC64 PPC64LE PPCEMB PPCLE "
            "S390 S390X SH4 SH4EB SPARC SPARC64 UNICORE32 X86_64 XTENSA XTENSAEB"
        ).split()
    ]
    + [f"COMPUTE_ARCH_{a}" for a in "AARCH64 MIPSEL PPC64LE RISCV64 S390X X86_64".split()]
    + [f"COMPUTE_VIOMMU_MODEL_{m}" for m in "AUTO INTEL SMMUV3 VIRTIO".split()]
    + [
        f"COMPUTE_IMAGE_TYPE_{t}"
        for t in "AKI AMI ARI ISO PLOOP QCOW2 RAW VDI VHD VHDX VMDK".split()
    ]
)


def is_valid_resource_class(name: str) -> bool:
    """nova's RequestGroup.add_resource check: a standard class or CUSTOM_*."""
    return name.startswith(CUSTOM_NAMESPACE) or name in STANDARD_RESOURCE_CLASSES
