#!/usr/bin/env bash
# Create .venv-nova: upstream nova 34 from PyPI in its own virtualenv. Two users:
#  - the parity suite (tests/parity, `make parity`) compares asyncsched's decisions with nova's
#    scheduler filters and weighers, nova.virt.hardware and nova.pci.stats (no libvirt needed);
#  - the broker-restart baseline (tests/integration/chaos/test_chaos_broker_restart_nova.py)
#    runs the real nova-scheduler and nova-manage against PostgreSQL, hence psycopg2-binary;
#  - nova's databases on MariaDB (issue #25): nova-manage and nova's services speak MySQL
#    through PyMySQL (`mysql+pymysql://`, what deployment tools write), pinned as in
#    constraints.txt;
#  - the nova control-plane suite (tests/integration/nova, `make e2e-nova`) runs nova-api (nova's
#    osapi_compute WSGI app on the stdlib's wsgiref, so no WSGI server is installed),
#    nova-conductor and nova-compute on nova's fake virt drivers: nothing beyond the above.
# Idempotent: does nothing when the pinned version (with both database drivers) is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
NOVA_VERSION=${NOVA_VERSION:-34.0.0}
VENV=${NOVA_VENV:-.venv-nova}
PY=${PYTHON:-$(command -v python3.11 || command -v python3)}
# The stamp names everything installed: a venv from before a driver was added is completed.
PYMYSQL=$(grep -i '^pymysql==' constraints.txt)
stamp=$VENV/.installed-nova-$NOVA_VERSION+psycopg2+$PYMYSQL
if [ -f "$stamp" ]; then
    exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check "nova==$NOVA_VERSION" psycopg2-binary "$PYMYSQL" 2>&1 \
    | { grep -v -e "^WARNING: Location 'file://" -e BuildBackendWarning || true; }
test "${PIPESTATUS[0]}" -eq 0
PYTHONWARNINGS=ignore "$VENV/bin/python" -c 'import nova.scheduler.host_manager, nova.virt.hardware, nova.pci.stats, psycopg2, pymysql'
test -x "$VENV/bin/nova-scheduler" && test -x "$VENV/bin/nova-manage"
# Older stamps stay: a checkout from before this one (another worktree sharing the venv)
# finds its own and does not reinstall.
touch "$stamp"
