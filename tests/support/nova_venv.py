"""nova 34 in ``.venv-nova`` (``tools/nova_venv.sh``) and its ``nova-manage``, run as
subprocesses: nothing of nova is imported into this process, nor anything heavy of ours, so
the database helpers can use it (``tests.support.nova_scheduler`` re-exports these)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOVA_VENV = ROOT / ".venv-nova"
NOVA_BIN = NOVA_VENV / "bin"


def ensure_nova_venv(timeout: float = 900.0) -> None:
    """Install nova 34 (+ psycopg2) into .venv-nova if it is not there yet (about 40 s)."""
    subprocess.run([str(ROOT / "tools" / "nova_venv.sh")], check=True, timeout=timeout)


def nova_env() -> dict[str, str]:
    """The environment for nova's commands: this project's venv and path left out."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")
    }
    env["PATH"] = f"{NOVA_BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _manage(confs: list[Path], *args: str) -> str:
    cmd = [str(NOVA_BIN / "nova-manage")]
    for c in confs:
        cmd += ["--config-file", str(c)]
    done = subprocess.run(
        [*cmd, *args], capture_output=True, text=True, timeout=600, env=nova_env()
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"nova-manage {' '.join(args)} exited {done.returncode}:\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    return done.stdout
