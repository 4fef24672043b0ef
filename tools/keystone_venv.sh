#!/usr/bin/env bash
# A separate virtualenv with the real OpenStack keystone (PyPI `keystone`) for the keystone
# integration tests (tests/integration/placement/test_placement_keystone.py). Kept apart from
# .venv: keystone pins its own oslo/SQLAlchemy versions. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${KEYSTONE_VENV:-.venv-keystone}
PY=${PYTHON:-python3.11}
if [ ! -x "$VENV/bin/keystone-manage" ]; then
    "$PY" -m venv "$VENV"
    "$VENV/bin/pip" install -q --upgrade pip
    "$VENV/bin/pip" install -q "keystone>=26"
fi
"$VENV/bin/keystone-manage" --version
