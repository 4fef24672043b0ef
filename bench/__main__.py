"""Run every ``bench/bench_*.py`` module's ``main()`` in turn: ``python -m bench``."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path


def main() -> None:
    here = Path(__file__).parent
    for mod in sorted(pkgutil.iter_modules([str(here)]), key=lambda m: m.name):
        if mod.name.startswith("bench_"):
            print(f"== bench.{mod.name}", flush=True)
            try:
                importlib.import_module(f"bench.{mod.name}").main([])
            except Exception as exc:  # one broken bench must not hide the others' figures
                print(f"bench.{mod.name} failed: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
