"""ComputeCapabilitiesFilter on the bare key ``updated``, decided by nova 34 itself.

nova matches ``str(host_state.updated)``: the compute node's ``updated_at`` as an aware UTC
datetime (``2026-11-27 06:20:31.123456+00:00``). The same requirements go to nova's own filter
(in .venv-nova) and to ours, on the same timestamps.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from asyncsched.scheduling.filters.compute_capabilities_filter import ComputeCapabilitiesFilter
from tests.support.sched_helpers import config, host, spec

ROOT = Path(__file__).resolve().parents[2]
NOVA_PYTHON = ROOT / ".venv-nova" / "bin" / "python"

#: run by nova's python: nova's HostState.updated as _update_from_compute_node sets it
NOVA = """
import datetime, json, sys
from nova import objects
objects.register_all()
from nova.scheduler.filters.compute_capabilities_filter import ComputeCapabilitiesFilter
from nova.scheduler.host_manager import HostState
case = json.load(sys.stdin)
out = []
for stamp in case["stamps"]:
    hs = HostState("h1", "h1", "cell1")
    hs.updated = objects.ComputeNode(
        updated_at=datetime.datetime.fromisoformat(stamp)).updated_at
    for req in case["reqs"]:
        spec = objects.RequestSpec(flavor=objects.Flavor(extra_specs={"updated": req}))
        out.append(ComputeCapabilitiesFilter().host_passes(hs, spec))
print(json.dumps(out))
"""

STAMPS = ["2026-11-27 06:20:31.123456", "2025-01-02 03:04:05"]
REQS = [
    "<in> 2026",
    "<in> 2025",
    "<in> +00:00",
    "<in> 06:20:31.123456+00:00",
    "<in> 03:04:05+00:00",
    "s== 2025-01-02 03:04:05+00:00",
    "2026",
    "<or> 2025 <or> 2026",
]


@pytest.fixture(scope="module")
def nova_answers() -> list[bool]:
    subprocess.run([str(ROOT / "tools" / "nova_venv.sh")], check=True, timeout=600)
    got = subprocess.run(
        [str(NOVA_PYTHON), "-c", NOVA],
        input=json.dumps({"stamps": STAMPS, "reqs": REQS}),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return [bool(x) for x in json.loads(got.stdout.strip().splitlines()[-1])]


def test_bare_updated_matches_as_nova_matches(nova_answers: list[bool]) -> None:
    f = ComputeCapabilitiesFilter(config())
    ours = []
    for stamp in STAMPS:
        h = host("h1", updated=datetime.fromisoformat(stamp))  # naive from the DB: UTC
        for req in REQS:
            ours.append(f.state_passes(h, spec(extra_specs={"updated": req})) is None)
    assert ours == nova_answers
    assert any(nova_answers) and not all(nova_answers)  # the cases tell passing from failing
