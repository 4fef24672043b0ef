"""asyncsched decides as upstream nova 34 does, on seeded random clouds and requests.

The fixture installs nova 34 from PyPI into .venv-nova (tools/nova_venv.sh, about 45 s the
first time, nothing afterwards). Every difference is printed with its minimal case; the ones
docs/parity.md lists under "Where asyncsched knowingly differs" are explained, any other fails.
`make parity` runs the same comparison at a larger size.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tools.parity import cases, ours, run

ROOT = Path(__file__).resolve().parents[2]
CI_CASES = 120
CI_HOSTS = 8


@pytest.fixture(scope="module")
def worker() -> Iterator[run.NovaWorker]:
    subprocess.run([str(ROOT / "tools" / "nova_venv.sh")], check=True, timeout=600)
    w = run.NovaWorker()
    yield w
    w.close()


def test_no_unexplained_difference(worker: run.NovaWorker) -> None:
    report = run.run(CI_CASES, CI_HOSTS, worker=worker, log=print)
    print(run.summary(report))
    assert report.compared > CI_CASES * 20  # every case really answered on both sides
    shown = [run.format_finding(f) for f in report.unexplained if f.shrunk]
    assert not report.unexplained, "\n".join([*shown, run.summary(report)])


def test_a_planted_difference_is_found_and_shrunk(
    worker: run.NovaWorker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The harness itself: a wrong RAM filter in 'our' answer is caught on a minimal case."""
    real = ours.answer

    def wrong(case: dict[str, Any], nova: dict[str, Any]) -> dict[str, Any]:
        out = real(case, nova)
        if "ComputeFilter" in out["filters"]:
            out["filters"]["ComputeFilter"] = sorted(
                h["node"] for h in case["hosts"] if h["row"]["free_ram_mb"] >= 0
            )
        return out

    monkeypatch.setattr(ours, "answer", wrong)
    found = None
    for seed in range(40):
        case = cases.make_case(seed, 6)
        nova = worker.ask(case)
        if "invalid" in nova:
            continue
        if ("filters", "ComputeFilter") in run.differences(nova, ours.answer(case, nova)):
            found = case
            break
    assert found is not None
    minimal, ((nova_kept, our_kept), _) = run.shrink(
        worker, copy.deepcopy(found), ("filters", "ComputeFilter")
    )
    assert len(minimal["hosts"]) == 1
    assert nova_kept != our_kept
    assert minimal["config"]["filter_scheduler"]["enabled_filters"] == ["ComputeFilter"]
