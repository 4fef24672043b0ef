"""``[metrics] weight_setting``, read the same by MetricsFilter and MetricsWeigher."""

from __future__ import annotations


def parse_setting(setting: tuple[str, ...]) -> list[tuple[str, float]]:
    """``name=ratio`` entries; malformed ones are skipped, as nova does (with a warning).

    The name is kept exactly as written, as nova's ``parse_options`` keeps it: with
    ``cpu.percent =1.0`` the metric is named ``"cpu.percent "``, which no host reports.
    """
    out: list[tuple[str, float]] = []
    for item in setting:
        name, sep, ratio = item.partition("=")
        if not sep or not name:
            continue
        try:
            out.append((name, float(ratio)))  # as written, spaces too (nova's parse_options)
        except ValueError:
            continue
    return out
