"""extra_specs_ops.match decides as nova 34's own ``extra_specs_ops.match`` does.

nova's module (``.venv-nova``, built by ``tools/nova_venv.sh``) imports only ``operator``, so it
is loaded here by its path, without the rest of nova. Where nova raises on a malformed spec (a
word that is not a number for a numeric operator, ``<or>`` with nothing after it) asyncsched
answers no match instead (docs/parity.md): the request goes on without that host.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from asyncsched.scheduling.extra_specs_ops import _OPS, match

ROOT = Path(__file__).resolve().parents[3]
_NOVA_FILES = sorted(
    (ROOT / ".venv-nova").glob(
        "lib/python3*/site-packages/nova/scheduler/filters/extra_specs_ops.py"
    )
)


@functools.cache
def _nova_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nova_extra_specs_ops", _NOVA_FILES[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _nova_match() -> Callable[[str | None, str], bool]:
    if not _NOVA_FILES:
        pytest.skip(".venv-nova is not built (tools/nova_venv.sh)")
    found: Callable[[str | None, str], bool] = _nova_module().match
    return found


# Words the specs are made of: every operator, numbers, and the values themselves.
_WORDS = st.sampled_from([*_OPS, "<or>", "1", "2", "12", "2.5", "-1", "a", "ab", "b", "abc"])
_SPECS = st.lists(_WORDS, max_size=8).map(" ".join)
_VALUES = st.one_of(
    st.none(), st.sampled_from(["", "1", "2", "12", "2.5", "a", "ab", "b", "abc", "1 2"])
)


def test_nova_operators_are_ours() -> None:
    _nova_match()
    assert set(_nova_module().op_methods) == set(_OPS)


@settings(max_examples=2000, deadline=None)
@given(value=_VALUES, req=_SPECS)
def test_match_decides_as_nova(value: str | None, req: str) -> None:
    nova_match = _nova_match()
    try:
        expected = nova_match(value, req)
    except (ValueError, TypeError, IndexError):
        expected = False  # nova raises; asyncsched answers no match
    assert match(value, req) is expected


@pytest.mark.parametrize(
    ("value", "req"),
    [
        ("b", "<or> a <or> b"),
        ("b", "<or> a x b"),
        ("x", "<or> a x b"),
        ("a", "<or>"),
        ("a", "<or> a <or>"),
    ],
)
def test_or_edge_cases_as_nova(value: str, req: str) -> None:
    nova_match = _nova_match()
    try:
        expected = nova_match(value, req)
    except IndexError:
        expected = False
    assert match(value, req) is expected
