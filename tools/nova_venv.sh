#!/usr/bin/env bash
# Create .venv-nova: upstream nova 34 from PyPI in its own virtualenv, the reference the parity
# suite (tests/parity, `make parity`) compares asyncsched's decisions with. No libvirt is needed:
# only nova's scheduler filters and weighers, nova.virt.hardware and nova.pci.stats are imported.
# Idempotent: does nothing when the pinned version is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
NOVA_VERSION=${NOVA_VERSION:-34.0.0}
VENV=${NOVA_VENV:-.venv-nova}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
stamp=$VENV/.installed-nova-$NOVA_VERSION
if [ -f "$stamp" ]; then
    exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check "nova==$NOVA_VERSION" 2>&1 \
    | { grep -v -e "^WARNING: Location 'file://" -e BuildBackendWarning || true; }
test "${PIPESTATUS[0]}" -eq 0
PYTHONWARNINGS=ignore "$VENV/bin/python" -c 'import nova.scheduler.host_manager, nova.virt.hardware, nova.pci.stats'
rm -f "$VENV"/.installed-nova-*
touch "$stamp"
