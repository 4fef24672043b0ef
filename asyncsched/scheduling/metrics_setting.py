"""``[metrics] weight_setting``, read the same by MetricsFilter and MetricsWeigher."""

from __future__ import annotations


def parse_setting(setting: tuple[str, ...]) -> list[tuple[str, float]]:
    """``name=ratio`` entries; malformed ones are skipped, as nova does (with a warning)."""
    out: list[tuple[str, float]] = []
    for item in setting:
        name, sep, ratio = item.partition("=")
        if not sep:
            continue
        try:
            out.append((name.strip(), float(ratio)))
        except ValueError:
            continue
    return out
