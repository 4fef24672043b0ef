"""The Placement microversions asyncsched speaks, and the one rule comparing them."""

from __future__ import annotations

#: what nova uses for GET /allocation_candidates, the claim built from them and DELETE
CANDIDATES_VERSION = "1.36"
#: PUT /allocations carries consumer_generation from here on
CONSUMER_GENERATION_VERSION = "1.28"
#: PUT /allocations carries consumer_type from here on
CONSUMER_TYPE_VERSION = "1.38"


def version_tuple(version: str) -> tuple[int, int]:
    """``"1.36"`` -> ``(1, 36)``; a missing minor is 0. Raises ValueError on other text."""
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)


def at_least(version: str, minimum: str) -> bool:
    """True when microversion ``version`` is ``minimum`` or newer."""
    return version_tuple(version) >= version_tuple(minimum)
