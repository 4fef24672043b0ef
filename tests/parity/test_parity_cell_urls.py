"""Cell mapping URL templates filled by nova 34's own ``CellMapping._format_url`` (in
.venv-nova) and by ours: the same URL for every case of tests/unit/state."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from asyncsched.state.api import format_cell_url
from tests.support.cell_urls import CASES
from tests.support.nova_scheduler import NOVA_BIN, nova_env

ROOT = Path(__file__).resolve().parents[2]
NOVA_SIDE = """
import json, sys
from nova.objects.cell_mapping import CellMapping
print(json.dumps([CellMapping._format_url(t, d) for t, d in json.load(sys.stdin)]))
"""


# nova's format_db_url, not _format_url, keeps a URL with a literal brace as it stands
COMPARED = [(t, d) for t, d, _ in CASES if "pa{ss" not in t]


def test_templates_match_nova() -> None:
    subprocess.run([str(ROOT / "tools" / "nova_venv.sh")], check=True, timeout=600)
    done = subprocess.run(
        [str(NOVA_BIN / "python"), "-c", NOVA_SIDE],
        input=json.dumps(COMPARED),
        capture_output=True,
        text=True,
        env=nova_env(),
        timeout=120,
        check=True,
    )
    nova = json.loads(done.stdout)
    assert [format_cell_url(t, d, "[database]") for t, d in COMPARED] == nova
