"""``make demo`` (tools/demo.py) runs the whole story and leaves nothing behind."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import psycopg2
import pytest

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]


def databases() -> set[str]:
    conn = psycopg2.connect(host="127.0.0.1", user="root", dbname="postgres")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT datname FROM pg_database")
            return {row[0] for row in cur.fetchall()}
    finally:
        conn.close()


def test_demo_boots_a_batch_through_the_real_stack_and_cleans_up() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "demo.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 0, out + done.stderr
    assert "READY=1 from pid" in out
    assert re.search(r"30 instances placed and claimed in Placement in \d+ ms", out)
    assert "east-12 (disabled) chosen: no" in out
    assert "distinct hosts: 4 of 4" in out
    assert "nova.exception.NoValidHost: No valid host was found." in out
    assert "allocations in Placement for it: none" in out
    assert "asyncsched exited with status 0" in out
    # One table row per instance of the batch: short uuid, host, node (= host), cell, AZ.
    rows = re.findall(
        r"^  [0-9a-f]{8}  ((?:east|west)-\d\d)  \1  cell[12]  (east|west) ", out, re.M
    )
    assert len(rows) == 30 + 4
    # Usage rows: instances per host add up to the 35 claimed (30 + 4 + step 4b's one).
    usage = re.findall(r"^  (?:east|west)-\d\d  \w+ +\d+/\d+ +\d+/\d+ +\d+/\d+ +(\d+)", out, re.M)
    assert len(usage) == 24 and sum(map(int, usage)) == 35
    # Step 7, "see why" on the admin endpoint the demo turned on: explain names the disabled
    # host's rule, capacity counts what still fits (and leaves it out).
    assert re.search(r"admin_listen = 127\.0\.0\.1:\d+\)", out)
    assert "$ asyncsched explain --vcpus 4 --ram 16384 --disk 80 --top 3 --host east-12" in out
    assert "host east-12: rejected by ComputeFilter (disabled)" in out
    assert re.search(r"ComputeFilter +24 +23 +-1 \(disabled 1\)", out), out
    assert "$ asyncsched capacity --vcpus 4 --ram 16384 --disk 80" in out
    fit = re.search(r"(\d+) more instances fit, on 23 of 24 hosts", out)
    assert fit and int(fit.group(1)) > 0, out
    assert "hosts taking none: ComputeFilter: disabled 1" in out
    tag = re.search(r"PostgreSQL: (asyncsched_demo_[0-9a-f]+)_api", out)
    placement_db = re.search(r"database (placement_test_[0-9a-f]+)\)", out)
    assert tag and placement_db
    left = {d for d in databases() if d.startswith(tag.group(1)) or d == placement_db.group(1)}
    assert left == set()
