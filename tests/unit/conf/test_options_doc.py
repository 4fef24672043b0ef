"""docs/operators.md's option reference is the one tools/options_doc.py generates now."""

from __future__ import annotations

import dataclasses
import typing

from asyncsched.conf import options as opts
from tools import options_doc


def test_the_committed_option_reference_is_current() -> None:
    text = options_doc.DOC.read_text(encoding="utf-8")
    assert options_doc.rewrite(text) == text, "run: python -m tools.options_doc"
    assert options_doc.main(["--check"]) == 0


def test_every_option_of_the_schema_is_in_the_reference() -> None:
    block = options_doc.DOC.read_text(encoding="utf-8").split(options_doc.BEGIN)[1]
    hints = typing.get_type_hints(opts.Config)
    for ini_name, attr in opts.SECTIONS.items():
        assert f"#### [{ini_name}]" in block
        for f in dataclasses.fields(hints[attr]):
            assert f.metadata.get("rest") or f"| `{f.name}` |" in block, (ini_name, f.name)


def test_a_stale_reference_is_caught() -> None:
    text = options_doc.DOC.read_text(encoding="utf-8")
    stale = text.replace("| `host_subset_size` |", "| `host_subset_sise` |")
    assert stale != text and options_doc.rewrite(stale) != stale
