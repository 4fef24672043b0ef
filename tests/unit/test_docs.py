"""The README is a front door (issue #22): at most 400 lines, the sections it promises, and
links that lead somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_the_readme_fits_and_has_its_sections() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 400
    for heading in (
        "## How it maps to nova-scheduler",
        "## Two commands on a fresh machine",
        "## Configuration essentials",
        "## nova operations served",
        "## Links",
    ):
        assert f"\n{heading}\n" in text, heading
    assert "make demo" in text and "make test" in text


def test_every_relative_link_of_the_readme_and_docs_leads_to_a_file() -> None:
    for doc in [README, *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text(encoding="utf-8")):
            path = (doc.parent / target).resolve()
            assert path.exists(), f"{doc.name}: {target}"
