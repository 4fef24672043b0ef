"""Text for ``asyncsched explain`` and ``asyncsched capacity``: the JSON answers, readable.

Pure functions over the JSON the admin endpoint returns (``Explanation.as_dict``,
``Capacity.as_dict``), so what the CLI prints is exactly what the daemon said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def table(rows: Sequence[Sequence[str]], indent: str = "  ") -> list[str]:
    """Left-aligned columns, a dashed rule under the first row."""
    if not rows:
        return []
    widths = [max(len(r[i]) for r in rows if i < len(r)) for i in range(len(rows[0]))]
    out = []
    for n, row in enumerate(rows):
        out.append(indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))
        if n == 0:
            out.append(indent + "  ".join("-" * w for w in widths))
    return [line.rstrip() for line in out]


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def request_words(fields: Mapping[str, Any]) -> str:
    """``2 vCPU, 4096 MiB RAM, 40 GB disk`` (+ extra specs, image properties, hints, AZ)."""
    parts = [
        f"{fields.get('vcpus', 1)} vCPU",
        f"{fields.get('ram', 512)} MiB RAM",
        f"{fields.get('disk', 0)} GB disk",
    ]
    for key in ("extra_specs", "image_properties", "scheduler_hints"):
        parts += [f"{k}={v}" for k, v in (fields.get(key) or {}).items()]
    if fields.get("availability_zone"):
        parts.append(f"AZ {fields['availability_zone']}")
    return ", ".join(parts)


def explain_text(answer: Mapping[str, Any], what: str) -> str:
    n = answer["num_instances"]
    lines = [
        f"explain: {what}; {n} instance{'s' if n != 1 else ''} -> {answer['outcome']}"
        " (a dry run: nothing claimed)",
        "",
        "funnel (first instance):",
    ]
    rows = [["step", "in", "out", "dropped"]]
    for s in answer["steps"]:
        gone = s["in"] - s["out"]
        dropped = f"-{gone} ({_counts(s['reasons'])})" if gone else ""
        detail = "; ".join(x for x in (dropped, s["note"]) if x)
        rows.append([s["name"], str(s["in"]), str(s["out"]), detail])
    lines += table(rows)
    top = answer["top"]
    if top:
        used = [w for w in top[0]["weighers"] if any(h["weighers"][w] for h in top)]
        lines += ["", "best hosts (of those that passed), weight = sum of the weigher shares:"]
        rows = [["rank", "host", "node", "weight", *used]]
        for h in top:
            shares = [f"{h['weighers'][w]:.4f}" for w in used]
            rows.append([str(h["rank"]), h["host"], h["nodename"], f"{h['weight']:.4f}", *shares])
        lines += table(rows)
    if answer["selections"]:
        lines += ["", "select_destinations would return:"]
        rows = [["instance", "host", "node", "AZ", "alternates"]]
        for i, sel in enumerate(answer["selections"], 1):
            alts = ", ".join(sel["alternates"]) or "-"
            az = sel["availability_zone"] or "-"
            rows.append([str(i), sel["host"], sel["nodename"], az, alts])
        lines += table(rows)
    verdict = answer.get("host")
    if verdict:
        lines += ["", _verdict(verdict)]
        lines += _shares(verdict)
    lines += ["", f"all instances: {answer['summary']}"]
    return "\n".join(lines) + "\n"


def _shares(v: Mapping[str, Any]) -> list[str]:
    """The named host's weigher shares: its own (it passed) or what it would have had."""
    weight, terms = v.get("weight"), v.get("weighers") or {}
    if weight is None:
        return []
    passed = v["verdict"] in ("selected", "ranked")
    head = "  its weight" if passed else "  had it passed, the weighers would have given it"
    shares = ", ".join(f"{name} {share:.4f}" for name, share in terms.items()) or "no share"
    return [f"{head}: {weight:.4f} = {shares}"]


def _verdict(v: Mapping[str, Any]) -> str:
    name, kind = v["host"], v["verdict"]
    failed = ", ".join(f"{f['step']} ({f['reason']})" for f in v.get("failed") or ())
    if kind == "selected":
        return f"host {name}: selected (rank {v['rank']})"
    if kind == "ranked":
        return f"host {name}: passes every filter, rank {v['rank']} by weight"
    if kind == "rejected" and failed:
        return f"host {name}: rejected by {failed}"
    if kind == "rejected" and v["step"]:
        return f"host {name}: rejected by {v['step']}: {v['reason']}"
    also = f"; it also fails {failed}" if failed else "; the filters would pass it"
    if kind == "beyond-limit":
        return (
            f"host {name}: Placement has room on it, but it is not among the first {v['limit']} "
            f"allocation candidates ([scheduler] max_placement_results){also}"
        )
    if kind == "not-a-candidate":
        also = f"; it also fails {failed}" if failed else ""
        return f"host {name}: Placement has no allocation candidate on it (no room or traits){also}"
    return f"host {name}: {kind}" + (f" ({v['reason']})" if v.get("reason") else "")


def capacity_text(answer: Mapping[str, Any], what: str, host: str | None = None) -> str:
    lines = [
        f"capacity: {what}",
        f"  {'at least ' if answer.get('bounded') else ''}{answer['total']} more instances fit,"
        f" on {answer['hosts_used']} of {answer['hosts_known']} hosts"
        f" ({answer['seconds']:.2f} s, nothing claimed)",
    ]
    if answer.get("bounded"):
        lines.append(f"  bounded: {answer['bounded']}")
    if answer.get("note"):
        lines.append(f"  note: {answer['note']}")
    lines += [
        f"  runs out first: {answer['runs_out_first'] or '-'}",
        f"  hosts stopped by: {_counts(answer['limited_by'])}",
        f"  hosts taking none: {_counts(answer['excluded'])}",
        "",
    ]
    rows = [["by", "name", "instances"]]
    for label, key in (("AZ", "per_az"), ("cell", "per_cell"), ("aggregate", "per_aggregate")):
        for name, count in answer[key].items():
            rows.append([label, name, str(count)])
    lines += table(rows)
    if host:
        mine = {k: v for k, v in answer["per_host"].items() if host.lower() in k.lower().split("/")}
        count = sum(mine.values())
        lines += [
            "",
            f"host {host}: {count} more" + ("" if count else " (explain --host says why)"),
        ]
    return "\n".join(lines) + "\n"
