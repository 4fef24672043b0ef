"""Resource arithmetic below state and scheduling: NUMA fitting/usage and PCI pools."""
