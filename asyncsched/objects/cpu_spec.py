"""nova's CPU set syntax (``"0-3,^2,8"``), as image properties and legacy hosts write it."""

from __future__ import annotations


def parse_cpu_spec(spec: str) -> frozenset[int]:
    """nova's CPU range syntax: ``"0-3,^2,8"``. Malformed -> ValueError."""
    include: set[int] = set()
    exclude: set[int] = set()
    for raw in spec.split(","):
        rule = raw.strip()
        if not rule:
            continue
        negate = rule.startswith("^")
        if negate:
            rule = rule[1:].strip()
        if "-" in rule:
            lo_s, _, hi_s = rule.partition("-")
            lo, hi = int(lo_s), int(hi_s)
            if lo > hi:
                raise ValueError(f"invalid CPU range {raw!r}")
            cpus = set(range(lo, hi + 1))
        else:
            cpus = {int(rule)}
        (exclude if negate else include).update(cpus)
    return frozenset(include - exclude)
