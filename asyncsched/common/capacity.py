"""Placement's capacity rule, written once for the mirror, the guard's reads and the API
bodies: allocations of a class may sum to ``(total - reserved) * allocation_ratio``, a float
Placement compares with, and it reports the ``int`` of it as the capacity."""

from __future__ import annotations


def usable(total: int, reserved: int, allocation_ratio: float) -> float:
    """What allocations of one resource class of one provider may sum to."""
    return (total - reserved) * allocation_ratio


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """The capacity Placement reports (``provider_summaries``, usage checks)."""
    return int(usable(total, reserved, allocation_ratio))
