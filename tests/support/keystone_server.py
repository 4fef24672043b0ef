"""The real OpenStack keystone for tests, from its own virtualenv (``tools/keystone_venv.sh``).

keystone pins its own library versions, so it lives in ``.venv-keystone``, never in ``.venv``.
``KeystoneServer`` configures it on SQLite in a temp dir (fernet tokens), bootstraps the admin
user with the identity endpoint in region RegionOne, runs it under gunicorn on a free loopback
port, and can add catalog entries (``add_endpoint``). ``available()`` says whether the venv
exists; tests that need keystone skip with that reason when it does not.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.placement_server import _free_port, terminate_group

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("KEYSTONE_VENV", ROOT / ".venv-keystone"))
ADMIN_PASSWORD = "Adm1n-ks-pass"
REGION = "RegionOne"


# keystone parses the process's command line with oslo.config, so it is served by a script
# whose argv is its own (a threaded wsgiref server is plenty for tests).
_SERVE = """
import socketserver, sys
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
port = int(sys.argv[1])
sys.argv = sys.argv[:1]
from keystone.wsgi.api import application
class Server(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True
class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass
make_server("127.0.0.1", port, application, Server, Quiet).serve_forever()
"""


def available() -> bool:
    return (VENV / "bin" / "keystone-manage").is_file()


class KeystoneServer:
    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def auth_url(self) -> str:
        return self.url + "/v3"

    def _manage(self, *args: str) -> None:
        assert self._dir is not None
        subprocess.run(
            [str(VENV / "bin" / "keystone-manage"), "--config-file", str(self._conf), *args],
            check=True,
            capture_output=True,
            timeout=300,
        )

    @property
    def _conf(self) -> Path:
        assert self._dir is not None
        return self._dir / "keystone.conf"

    def start(self, timeout: float = 60.0) -> KeystoneServer:
        self._dir = Path(tempfile.mkdtemp(prefix="keystone-"))
        d = self._dir
        self._conf.write_text(
            "[DEFAULT]\n"
            "[database]\n"
            f"connection = sqlite:///{d}/keystone.db\n"
            "[token]\nprovider = fernet\nexpiration = 3600\n"
            f"[fernet_tokens]\nkey_repository = {d}/fernet-keys\n"
            f"[fernet_receipts]\nkey_repository = {d}/fernet-receipts\n"
            f"[credential]\nkey_repository = {d}/credential-keys\n"
        )
        user, group = str(os.getuid()), str(os.getgid())
        try:
            self._manage("db_sync")
            self._manage("fernet_setup", "--keystone-user", user, "--keystone-group", group)
            self._manage("credential_setup", "--keystone-user", user, "--keystone-group", group)
            self._manage(
                "bootstrap",
                "--bootstrap-password",
                ADMIN_PASSWORD,
                "--bootstrap-admin-url",
                self.auth_url,
                "--bootstrap-public-url",
                self.auth_url,
                "--bootstrap-internal-url",
                self.auth_url,
                "--bootstrap-region-id",
                REGION,
            )
            log = open(d / "keystone.log", "ab")
            self._proc = subprocess.Popen(
                [str(VENV / "bin" / "python"), "-c", _SERVE, str(self.port)],
                env=dict(os.environ, OS_KEYSTONE_CONFIG_DIR=str(d)),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            log.close()
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                raise RuntimeError(f"keystone exited early; see {self._dir}/keystone.log")
            try:
                with urllib.request.urlopen(self.auth_url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"keystone did not answer on {self.url} within {timeout} s")

    def _call(self, method: str, path: str, body: Any, token: str | None = None) -> Any:
        req = urllib.request.Request(
            self.auth_url + path,
            data=json.dumps(body).encode(),
            method=method,
            headers={
                "Content-Type": "application/json",
                **({"X-Auth-Token": token} if token else {}),
            },
        )
        with urllib.request.urlopen(req, timeout=30) as resp:
            token_header = resp.headers.get("X-Subject-Token")
            data = json.loads(resp.read() or b"{}")
        return token_header or data

    def admin_token(self) -> str:
        body = {
            "auth": {
                "identity": {
                    "methods": ["password"],
                    "password": {
                        "user": {
                            "name": "admin",
                            "domain": {"id": "default"},
                            "password": ADMIN_PASSWORD,
                        }
                    },
                },
                "scope": {"project": {"name": "admin", "domain": {"id": "default"}}},
            }
        }
        token: str = self._call("POST", "/auth/tokens", body)
        return token

    def revoke(self, token: str) -> None:
        """DELETE /v3/auth/tokens: the token is invalid from now on."""
        req = urllib.request.Request(
            self.auth_url + "/auth/tokens",
            method="DELETE",
            headers={"X-Auth-Token": self.admin_token(), "X-Subject-Token": token},
        )
        with urllib.request.urlopen(req, timeout=30):
            pass

    def authtoken_section(self) -> dict[str, str]:
        """``[keystone_authtoken]`` for a service validating tokens here (no token cache)."""
        return {
            "www_authenticate_uri": self.auth_url,
            "auth_url": self.auth_url,
            "auth_type": "password",
            "username": "admin",
            "password": ADMIN_PASSWORD,
            "user_domain_id": "default",
            "project_name": "admin",
            "project_domain_id": "default",
            "token_cache_time": "-1",
        }

    def add_endpoint(self, service_type: str, url: str, interfaces: tuple[str, ...]) -> None:
        """A catalog service with one endpoint per interface in RegionOne."""
        token = self.admin_token()
        svc = self._call(
            "POST", "/services", {"service": {"type": service_type, "name": service_type}}, token
        )
        for interface in interfaces:
            ep = {"service_id": svc["service"]["id"], "interface": interface, "url": url}
            self._call("POST", "/endpoints", {"endpoint": {**ep, "region_id": REGION}}, token)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        terminate_group(proc)
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
