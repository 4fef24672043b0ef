"""nova's ``extra_specs_ops.match``: the operator mini-language of flavor extra specs.

Used by ComputeCapabilitiesFilter and AggregateInstanceExtraSpecsFilter. The first word of the
requirement may be an operator; without one the value must equal the requirement exactly.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any


def _num(op: Callable[[float, float], bool]) -> Callable[[Any, Any], bool]:
    def compare(x: Any, y: Any) -> bool:
        try:
            return op(float(x), float(y))
        except (TypeError, ValueError):
            return False  # nova raises here; a malformed spec must not crash the request

    return compare


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": _num(operator.ge),
    "<in>": lambda x, y: y in x,
    "<all-in>": lambda x, y: all(v in x for v in y),
    "==": _num(operator.eq),
    "!=": _num(operator.ne),
    ">=": _num(operator.ge),
    "<=": _num(operator.le),
    "s==": operator.eq,
    "s!=": operator.ne,
    "s<": operator.lt,
    "s<=": operator.le,
    "s>": operator.gt,
    "s>=": operator.ge,
}


def match(value: str | None, req: str) -> bool:
    """True if ``value`` (a host's string) satisfies the requirement ``req``.

    ``req`` is a flavor's extra spec, untrusted text: every branch is linear in its length
    (one ``split``, then at most one pass over the words).
    """
    words = req.split()
    op = words[0] if words else None
    method = _OPS.get(op) if op is not None else None
    if op != "<or>" and method is None:
        return value == req
    if value is None:
        return False
    if op == "<or>":  # <or> v1 <or> v2 ...: the values stand at the odd places
        # (nova pops them one by one from the front, quadratic in the words)
        return value in words[1::2]
    if len(words) < 2:
        return False
    assert method is not None
    if op == "<all-in>":
        return method(value, words[1:])
    return method(value, words[1])
