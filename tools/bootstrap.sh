#!/usr/bin/env bash
# Create .venv with asyncsched and its test extra (real oslo.messaging and Placement included),
# at the exact versions of constraints.txt (what CI tested). Re-runs only pip when
# pyproject.toml or constraints.txt changed since the last install.
# VENV=<dir> builds another venv (e.g. to try a changed constraints file without touching .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=${VENV:-.venv}
quiet_pip() {
    # pip's warnings about this machine's unused local indexes are noise; keep real errors.
    "$@" 2>&1 | { grep -v -e "^WARNING: Location 'file://" -e BuildBackendWarning || true; }
    return "${PIPESTATUS[0]}"
}
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
    quiet_pip "$VENV/bin/pip" install -q --upgrade pip
fi
stamp=$VENV/.installed-$(cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
    echo "bootstrap: installing asyncsched[test] into $VENV (constraints.txt)"
    quiet_pip "$VENV/bin/pip" install -q -c constraints.txt -e '.[test]'
    rm -f "$VENV"/.installed-*
    touch "$stamp"
fi
