"""Differential parity run: random cases through nova 34 and asyncsched, differences shrunk.

For each seeded case the nova worker (a long-lived subprocess under .venv-nova, JSON lines)
answers first; asyncsched answers from the same rows and RequestSpec primitive. Every part
that differs (one filter's kept hosts, one weigher's scores, the NUMA fits, the PCI checks,
the multi-create picks) is shrunk to a minimal case by dropping hosts, then request and host
details, while it still differs. A difference docs/parity.md lists under "Where asyncsched knowingly
differs" is reported as explained (with the reason); any other is unexplained.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asyncsched.conf.options import DEFAULT_FILTERS
from tools.parity import cases, known, ours

ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).resolve().with_name("nova_worker.py")
NOVA_PYTHON = ROOT / ".venv-nova" / "bin" / "python"

Key = tuple[str, ...]


class NovaWorker:
    """nova_worker.py as a subprocess: one JSON case in, one JSON answer out."""

    def __init__(self, python: Path = NOVA_PYTHON) -> None:
        self.proc = subprocess.Popen(
            [str(python), str(WORKER)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={"PYTHONWARNINGS": "ignore", "PATH": "/usr/bin:/bin"},
        )

    def ask(self, case: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(case) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"nova worker exited with {self.proc.wait()}")
        result: dict[str, Any] = json.loads(line)
        if "crash" in result:
            raise RuntimeError(f"nova worker failed on case {case.get('seed')}: {result['crash']}")
        return result

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float | int) and isinstance(b, float | int):
        return abs(float(a) - float(b)) <= 1e-6
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def differences(nova: dict[str, Any], mine: dict[str, Any]) -> dict[Key, tuple[Any, Any]]:
    """(part, name) -> (nova's answer, ours) for every part that differs."""
    out: dict[Key, tuple[Any, Any]] = {}
    for part in ("filters", "weighers"):
        for name in sorted(set(nova[part]) | set(mine[part])):
            a, b = nova[part].get(name), mine[part].get(name)
            if not _same(a, b):
                out[(part, name)] = (a, b)
    for part in ("load", "numa", "pci", "sequence"):
        a, b = nova.get(part, "ok" if part == "load" else None), mine.get(part)
        if not _same(a, b):
            out[(part,)] = (a, b)
    return out


def diff_of(
    worker: NovaWorker, case: dict[str, Any], key: Key
) -> tuple[tuple[Any, Any], dict[str, Any]] | None:
    """(the difference at ``key``, nova's whole answer) for ``case``; None when the sides
    agree there (or nova refuses the request)."""
    nova = worker.ask(case)
    if "invalid" in nova:
        return None
    d = differences(nova, ours.answer(case, nova)).get(key)
    return None if d is None else (d, nova)


def _reductions(case: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Smaller variants of ``case``: one host fewer, then one detail fewer."""
    for i in range(len(case["hosts"])):
        c = copy.deepcopy(case)
        del c["hosts"][i]
        if c["hosts"]:
            yield c
    for i in range(len(case["aggregates"])):
        c = copy.deepcopy(case)
        del c["aggregates"][i]
        yield c
    req = case["request"]
    for part in ("extra_specs",):
        for k in req["flavor"][part]:
            c = copy.deepcopy(case)
            del c["request"]["flavor"][part][k]
            yield c
    for part in ("image_props", "hints"):
        for k in req[part]:
            c = copy.deepcopy(case)
            del c["request"][part][k]
            yield c
    for k, empty in (("group", None), ("pci_requests", [])):
        if req.get(k):
            c = copy.deepcopy(case)
            c["request"][k] = empty
            yield c
    if req.get("num_instances", 1) > 2:
        c = copy.deepcopy(case)
        c["request"]["num_instances"] -= 1
        yield c
    for i in range(len(case["sequence_filters"])):
        c = copy.deepcopy(case)
        del c["sequence_filters"][i]
        yield c
    if len(case["weighers"]) > 1:
        for i in range(len(case["weighers"])):
            c = copy.deepcopy(case)
            del c["weighers"][i]
            yield c
    for i, h in enumerate(case["hosts"]):
        for k in ("metrics", "pci_pools", "supported_instances"):
            for j in range(len(h["row"].get(k) or [])):
                c = copy.deepcopy(case)
                del c["hosts"][i]["row"][k][j]
                yield c
        for k in h["row"]["stats"]:
            c = copy.deepcopy(case)
            del c["hosts"][i]["row"]["stats"][k]
            yield c
        if h["row"].get("numa"):
            c = copy.deepcopy(case)
            c["hosts"][i]["row"]["numa"] = None
            yield c
        if h.get("instances"):
            c = copy.deepcopy(case)
            c["hosts"][i]["instances"] = []
            yield c
    for group, values in case["config"].items():
        for k in values:
            if k != "enabled_filters":
                c = copy.deepcopy(case)
                del c["config"][group][k]
                yield c
    setting = case["config"].get("metrics", {}).get("weight_setting", [])
    for j in range(len(setting)):
        c = copy.deepcopy(case)
        del c["config"]["metrics"]["weight_setting"][j]
        yield c


def shrink(
    worker: NovaWorker, case: dict[str, Any], key: Key, budget: int = 400
) -> tuple[dict[str, Any], tuple[tuple[Any, Any], dict[str, Any]]]:
    """Greedy: keep any reduction that still differs at ``key``, until none does."""
    original = case
    if key[0] == "filters":  # only the filter in question
        case = copy.deepcopy(case)
        case["config"]["filter_scheduler"]["enabled_filters"] = [key[1]]
    if key[0] == "weighers":
        case = copy.deepcopy(case)
        case["weighers"] = [key[1]]
    current = diff_of(worker, case, key)
    if current is None:  # it needs the other filters or weighers: shrink with them all
        case, current = original, diff_of(worker, original, key)
        if current is None:
            raise RuntimeError(f"difference {key} is not reproducible on seed {case['seed']}")
    progress = True
    while progress and budget > 0:
        progress = False
        for smaller in _reductions(case):
            budget -= 1
            d = diff_of(worker, smaller, key)
            if d is not None:
                case, current, progress = smaller, d, True
                break
            if budget <= 0:
                break
    return case, current


@dataclass
class Finding:
    seed: int
    key: Key
    nova: Any
    ours: Any
    minimal: dict[str, Any]  # the shrunk case, or the case itself when not shrunk
    explained: str | None
    shrunk: bool = False


@dataclass
class Report:
    cases: int = 0
    invalid: int = 0
    compared: int = 0  # answers compared (one per filter, weigher, fit, check, pick list)
    seconds: float = 0.0
    findings: list[Finding] = field(default_factory=list)

    @property
    def unexplained(self) -> list[Finding]:
        return [f for f in self.findings if f.explained is None]


def _size(answer: dict[str, Any]) -> int:
    return (
        len(answer["filters"])
        + len(answer["weighers"])
        + len(answer["numa"])
        + len(answer["pci"])
        + (1 if "sequence" in answer else 0)
    )


def run(
    n_cases: int,
    n_hosts: int,
    first_seed: int = 0,
    *,
    worker: NovaWorker | None = None,
    log: Callable[[str], None] = lambda s: None,
    per_key: int = 3,
) -> Report:
    """Compare ``n_cases`` seeded cases; shrink up to ``per_key`` unexplained examples per part
    (one part can differ for several causes; the rest are counted, not shrunk)."""
    own = worker is None
    w = worker or NovaWorker()
    report = Report()
    shrunk: dict[Key, int] = {}
    start = time.perf_counter()
    try:
        for seed in range(first_seed, first_seed + n_cases):
            case = cases.make_case(seed, n_hosts)
            nova = w.ask(case)
            report.cases += 1
            if "invalid" in nova:
                report.invalid += 1
                continue
            mine = ours.answer(case, nova)
            report.compared += _size(nova)
            for key, (a, b) in differences(nova, mine).items():
                reason = known.explain(case, key, a, b, nova)
                if reason is None and shrunk.get(key, 0) < per_key:
                    shrunk[key] = shrunk.get(key, 0) + 1
                    minimal, ((a, b), shrunk_nova) = shrink(w, case, key)
                    reason = known.explain(minimal, key, a, b, shrunk_nova)
                    report.findings.append(Finding(seed, key, a, b, minimal, reason, True))
                    log(format_finding(report.findings[-1]))
                else:
                    report.findings.append(Finding(seed, key, a, b, case, reason))
    finally:
        report.seconds = time.perf_counter() - start
        if own:
            w.close()
    return report


def _brief(case: dict[str, Any]) -> str:
    """The minimal case without what never matters (uuids, cells, the seed)."""
    c = copy.deepcopy(case)
    c.pop("seed", None)
    for h in c["hosts"]:
        h.pop("uuid", None)
        h.pop("cell", None)
    c["request"].pop("instance_uuid", None)
    return json.dumps(c)


def complete(case: dict[str, Any]) -> dict[str, Any]:
    """A printed minimal case made runnable again (uuids, cells and the seed filled in)."""
    c = copy.deepcopy(case)
    c.setdefault("seed", 0)
    for i, h in enumerate(c["hosts"]):
        h.setdefault("uuid", str(uuid.uuid5(uuid.NAMESPACE_OID, h["node"])))
        h.setdefault("cell", f"0e0e0e0e-0000-4000-8000-c0000000000{i % 2}")
    c["request"].setdefault("instance_uuid", "0e0e0e0e-0000-4000-8000-0000000000ff")
    c.setdefault("sequence_filters", list(DEFAULT_FILTERS))
    return c


def format_finding(f: Finding) -> str:
    head = f"{'/'.join(f.key)} (seed {f.seed})"
    if f.explained is not None:
        return f"explained: {head}: {f.explained}"
    return (
        f"DIFFERENCE {head}\n  nova:       {json.dumps(f.nova)}\n"
        f"  asyncsched: {json.dumps(f.ours)}\n  minimal case: {_brief(f.minimal)}"
    )


def summary(r: Report) -> str:
    """Unexplained differences per part, then the figures."""
    per: dict[str, int] = {}
    for f in r.unexplained:
        per["/".join(f.key)] = per.get("/".join(f.key), 0) + 1
    lines = [f"unexplained x{n}: {k}" for k, n in sorted(per.items())]
    lines.append(
        f"{r.cases} cases ({r.invalid} refused by nova), {r.compared} answers compared, "
        f"{len(r.findings)} differences ({len(r.unexplained)} unexplained) in {r.seconds:.1f} s"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import logging

    logging.disable(logging.CRITICAL)  # asyncsched's own warnings are not findings

    p = argparse.ArgumentParser(prog="python -m tools.parity", description=__doc__)
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--hosts", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case", help="re-run one (printed minimal) case from this JSON file")
    a = p.parse_args(argv)
    if a.case:
        with open(a.case) as f:
            case = complete(json.load(f))
        w = NovaWorker()
        try:
            nova = w.ask(case)
            if "invalid" in nova:
                print(f"nova refuses this request: {nova['invalid']}")
                return 1
            found = differences(nova, ours.answer(case, nova))
        finally:
            w.close()
        for key, (n, o) in found.items():
            why = known.explain(case, key, n, o, nova)
            print(
                f"{'/'.join(key)}: nova {json.dumps(n)}  asyncsched {json.dumps(o)}"
                + (f"  (explained: {why})" if why else "")
            )
        print(f"{len(found)} differences")
        return 1 if found else 0
    r = run(a.cases, a.hosts, a.seed, log=print)
    explained: dict[str, int] = {}
    for finding in r.findings:
        if finding.explained is not None:
            explained[finding.explained] = explained.get(finding.explained, 0) + 1
    for reason, count in sorted(explained.items()):
        print(f"explained x{count}: {reason}")
    print(summary(r))
    return 1 if r.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
