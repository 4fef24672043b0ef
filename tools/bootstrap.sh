#!/usr/bin/env bash
# Create .venv with asyncsched and its test extra (real oslo.messaging and Placement included).
# Re-runs only pip when pyproject.toml changed since the last install.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
quiet_pip() {
    # pip's warnings about this machine's unused local indexes are noise; keep real errors.
    "$@" 2>&1 | { grep -v -e "^WARNING: Location 'file://" -e BuildBackendWarning || true; }
    return "${PIPESTATUS[0]}"
}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
    quiet_pip .venv/bin/pip install -q --upgrade pip
fi
stamp=.venv/.installed-$(sha1sum pyproject.toml | cut -c1-12)
if [ ! -f "$stamp" ]; then
    echo "bootstrap: installing asyncsched[test] into .venv"
    quiet_pip .venv/bin/pip install -q -e '.[test]'
    rm -f .venv/.installed-*
    touch "$stamp"
fi
