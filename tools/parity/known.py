"""Differences README lists under "Where asyncsched knowingly differs from nova".

Each rule recognises one documented case precisely (which answer, and what in the case causes
it); anything else is an unexplained difference. Keep this list and README's in step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Rule = tuple[str, Callable[[dict[str, Any], tuple[str, ...], Any, Any], bool]]


def _specs(case: dict[str, Any]) -> dict[str, str]:
    specs: dict[str, str] = case["request"]["flavor"]["extra_specs"]
    return specs


RULES: list[Rule] = [
    (
        "nova's ComputeCapabilitiesFilter crashes on hw:maxphysaddr_bits when cpu_info is a "
        "JSON string (it indexes the string); asyncsched parses cpu_info",
        lambda case, key, nova, mine: (
            key == ("filters", "ComputeCapabilitiesFilter")
            and isinstance(nova, str)
            and nova.startswith("!")
            and "hw:maxphysaddr_bits" in _specs(case)
        ),
    ),
]


def explain(case: dict[str, Any], key: tuple[str, ...], nova: Any, mine: Any) -> str | None:
    """The documented reason for this difference, or None when it is not documented."""
    for reason, applies in RULES:
        if applies(case, key, nova, mine):
            return reason
    return None
