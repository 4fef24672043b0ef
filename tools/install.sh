#!/usr/bin/env bash
# Production install of asyncsched (docs/operators.md, "Install"): a virtualenv of its own
# (Debian 12's system pip refuses to install into /usr), the console script where the systemd
# unit expects it, the operator's guide where the unit's Documentation= points, the unit.
#
#   sudo tools/install.sh                 # /opt/asyncsched, /etc/systemd/system
#
# PREFIX (default /opt/asyncsched) and UNIT_DIR (default /etc/systemd/system) move it;
# PIP_OPTS is passed to pip install (e.g. "--no-index --find-links /srv/wheels" offline).
# Re-running it upgrades in place. It does not start anything: see docs/operators.md, "Cutover".
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX=${PREFIX:-/opt/asyncsched}
UNIT_DIR=${UNIT_DIR:-/etc/systemd/system}
PYTHON=${PYTHON:-python3}

[ -x "$PREFIX/bin/python" ] || "$PYTHON" -m venv "$PREFIX"
# shellcheck disable=SC2086  # PIP_OPTS is a list of options
"$PREFIX/bin/pip" install --quiet ${PIP_OPTS:-} .
install -D -m 0644 docs/operators.md "$PREFIX/share/doc/asyncsched/operators.md"
install -D -m 0644 config/asyncsched.conf.minimal "$PREFIX/share/doc/asyncsched/asyncsched.conf.minimal"
install -D -m 0644 config/asyncsched.conf.sample "$PREFIX/share/doc/asyncsched/asyncsched.conf.sample"
# The unit names /opt/asyncsched; another PREFIX is written into the installed copy.
sed "s|/opt/asyncsched|$PREFIX|g" systemd/asyncsched.service > "$UNIT_DIR/asyncsched.service.tmp"
mv "$UNIT_DIR/asyncsched.service.tmp" "$UNIT_DIR/asyncsched.service"
echo "installed: $PREFIX/bin/asyncsched, $UNIT_DIR/asyncsched.service"
if [ "$PREFIX" = /opt/asyncsched ] && [ -d /usr/local/bin ] && [ -w /usr/local/bin ]; then
    ln -sf "$PREFIX/bin/asyncsched" /usr/local/bin/asyncsched
    echo "linked: /usr/local/bin/asyncsched -> $PREFIX/bin/asyncsched"
fi
