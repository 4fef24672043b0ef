"""``make demo``: run asyncsched against the local stack and show it ready.

Interim version (the service shell): writes a demo nova.conf pointing at the local RabbitMQ and
PostgreSQL, validates it with ``asyncsched check-config``, starts ``asyncsched serve`` the way
systemd would (a real notify socket, a watchdog), prints what the daemon reports, reloads it with
SIGHUP and stops it with SIGTERM. Once select_destinations works end to end, the lead extends
this with real Placement, a seeded demo cloud and a batch boot through oslo.messaging.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASYNCSCHED = [sys.executable, "-m", "asyncsched"]

DEMO_CONF = """\
[DEFAULT]
transport_url = rabbit://guest:guest@127.0.0.1:5672/
host = demo-scheduler
[api_database]
connection = postgresql+psycopg2://root@127.0.0.1:5432/postgres
[database]
connection = postgresql+psycopg2://root@127.0.0.1:5432/postgres
[placement]
auth_type = noauth
endpoint_override = http://127.0.0.1:8778
[filter_scheduler]
host_subset_size = 1
[asyncsched]
drain_timeout = 5
"""


def recv(sock: socket.socket, timeout: float = 60.0) -> dict[str, str]:
    sock.settimeout(timeout)
    data = sock.recv(65536).decode()
    return dict(line.split("=", 1) for line in data.splitlines() if "=" in line)


def wait_for(sock: socket.socket, key: str) -> dict[str, str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msg = recv(sock, deadline - time.monotonic())
        if "STATUS" in msg:
            print(f"  systemd status: {msg['STATUS']}")
        if key in msg:
            return msg
    raise TimeoutError(f"asyncsched did not send {key}")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="asyncsched-demo-", dir="/tmp") as tmp:
        conf = Path(tmp) / "nova.conf"
        conf.write_text(DEMO_CONF)
        print(f"== asyncsched check-config --config-file {conf}")
        subprocess.run([*ASYNCSCHED, "check-config", "--config-file", str(conf)], check=True)

        notify_path = os.path.join(tmp, "notify")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(notify_path)
        env = dict(os.environ, NOTIFY_SOCKET=notify_path, WATCHDOG_USEC="10000000")
        print(f"\n== asyncsched serve --config-file {conf}  (as systemd runs it)")
        proc = subprocess.Popen(
            [*ASYNCSCHED, "serve", "--config-file", str(conf)], cwd=ROOT, env=env
        )
        try:
            ready = wait_for(sock, "READY")
            print(f"  READY=1 from pid {ready.get('MAINPID')}")
            print("\n== systemctl reload (SIGHUP)")
            proc.send_signal(signal.SIGHUP)
            wait_for(sock, "READY")
            print("\n== systemctl stop (SIGTERM)")
            proc.send_signal(signal.SIGTERM)
            wait_for(sock, "STOPPING")
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            sock.close()
        print(f"\nasyncsched exited with status {code}")
        return code


if __name__ == "__main__":
    raise SystemExit(main())
