"""objects/ and conf/ sit under every other layer: they import nothing from above."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import asyncsched

ROOT = Path(asyncsched.__file__).parent

# package -> the asyncsched modules it may import (itself included)
ALLOWED = {
    "objects": (
        "asyncsched.objects",
        "asyncsched.conf",
        "asyncsched.exceptions",
        "asyncsched.common",
    ),
    "conf": ("asyncsched.conf", "asyncsched.exceptions", "asyncsched.common"),
}


def _imports(path: Path) -> list[str]:
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
            names.extend(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            names.append("<relative>")
    return names


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_package_imports_only_below_it(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    bad = []
    for path in files:
        for name in _imports(path):
            if name == "<relative>":
                bad.append(f"{path.relative_to(ROOT)}: relative import")
                continue
            if name == "asyncsched" or name.startswith("asyncsched."):
                if not any(name == a or name.startswith(a + ".") for a in ALLOWED[package]):
                    bad.append(f"{path.relative_to(ROOT)}: {name}")
    assert bad == []


def test_the_check_sees_a_forbidden_import(tmp_path: Path) -> None:
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from asyncsched.state.rows import node_snapshot\n")
    assert "asyncsched.state.rows" in _imports(mod)
