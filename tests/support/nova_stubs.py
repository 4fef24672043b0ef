"""Minimal image (glance v2) and network (neutron v2.0) services for a real nova control plane.

Neither is under test: nova boots with ``"networks": "none"`` but still lists ports, networks
and extensions on build, delete, moves, shelve and evacuate (every list is answered ``[]``);
nova-api reads ``GET /v2/images/{id}`` and the image schema; shelve and unshelve create, patch,
upload and delete a snapshot image. One threaded HTTP server answers both, under ``/image``
and ``/network``. Importable without pytest; runs in a daemon thread of the caller.
"""

from __future__ import annotations

import json
import threading
import uuid as uuidlib
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

IMAGE_SCHEMA: Mapping[str, Any] = {
    "name": "image",
    # nova sets boolean and null properties on snapshots (glanceclient validates with this)
    "additionalProperties": {
        "type": ["string", "boolean", "integer", "number", "null", "array", "object"]
    },
    "properties": {
        "id": {"type": "string"},
        "name": {"type": ["null", "string"]},
        "status": {"type": "string"},
        "container_format": {"type": ["null", "string"]},
        "disk_format": {"type": ["null", "string"]},
        "min_ram": {"type": "integer"},
        "min_disk": {"type": "integer"},
        "visibility": {"type": "string"},
        "size": {"type": ["null", "integer"]},
        "tags": {"type": "array"},
    },
}


def image_record(image_id: str, name: str) -> dict[str, Any]:
    """An active public raw image as glance v2 shows it."""
    return {
        "id": image_id,
        "name": name,
        "status": "active",
        "container_format": "bare",
        "disk_format": "raw",
        "min_ram": 0,
        "min_disk": 0,
        "size": 1024,
        "visibility": "public",
        "protected": False,
        "tags": [],
        "owner": "admin",
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "file": f"/v2/images/{image_id}/file",
        "schema": "/v2/schemas/image",
    }


class StubState:
    """The images the stub knows (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.images: dict[str, dict[str, Any]] = {}
        self.requests = 0

    def add_image(self, name: str) -> str:
        image_id = str(uuidlib.uuid4())
        with self.lock:
            self.images[image_id] = image_record(image_id, name)
        return image_id


def _apply_patch(image: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """Glance's JSON-patch subset nova sends (add / replace / remove of top-level keys)."""
    for op in ops:
        key = str(op.get("path", "/")).lstrip("/").split("/", 1)[0]
        if op.get("op") == "remove":
            image.pop(key, None)
        elif key:
            image[key] = op.get("value")


class _Handler(BaseHTTPRequestHandler):
    server: _StubServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(min(length, 1 << 20)) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return None

    def _send(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _route(self, method: str) -> None:
        state = self.server.state
        with state.lock:
            state.requests += 1
        path = self.path.split("?", 1)[0].rstrip("/")
        body = self._body() if method in ("POST", "PUT", "PATCH") else None
        if path.startswith("/image"):
            status, answer = _image(state, method, path[len("/image") :], body)
        elif path.startswith("/network"):
            status, answer = _network(method, path[len("/network") :])
        else:
            status, answer = 404, {"error": path}
        self._send(status, answer)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_PATCH(self) -> None:
        self._route("PATCH")

    def do_DELETE(self) -> None:
        self._route("DELETE")


def _versions(path: str) -> dict[str, Any]:
    return {"versions": [{"id": path, "status": "CURRENT", "links": []}]}


def _image(state: StubState, method: str, path: str, body: Any) -> tuple[int, Any]:
    parts = [p for p in path.split("/") if p]
    if not parts:
        return 300, _versions("v2.9")
    if parts[:2] == ["v2", "schemas"]:
        return 200, dict(IMAGE_SCHEMA)
    if parts[:2] != ["v2", "images"]:
        return 404, {"error": path}
    with state.lock:
        if len(parts) == 2:
            if method == "POST":
                created = image_record(str(uuidlib.uuid4()), "snapshot")
                created.update(body if isinstance(body, dict) else {})
                created["status"] = "queued"
                state.images[created["id"]] = created
                return 201, created
            return 200, {"images": list(state.images.values())}
        image = state.images.get(parts[2])
        if image is None:
            return 404, {"error": f"image {parts[2]} not found"}
        if len(parts) > 3:  # PUT .../file (a snapshot's upload)
            image["status"] = "active"
            return 204, None
        if method == "DELETE":
            del state.images[parts[2]]
            return 204, None
        if method == "PATCH" and isinstance(body, list):
            _apply_patch(image, body)
        return 200, dict(image)


def _network(method: str, path: str) -> tuple[int, Any]:
    """Every list is empty; nothing else is expected with networks "none"."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return 200, _versions("v2.0")
    if method == "GET" and len(parts) >= 2:
        resource = parts[-1].removesuffix(".json").replace("-", "_")
        return 200, {resource: []}
    return 404, {"NeutronError": {"message": f"{method} {path} not stubbed"}}


class _StubServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, state: StubState) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = state


class ServiceStubs:
    """The image and network stubs on one free loopback port, in a daemon thread."""

    def __init__(self) -> None:
        self.state = StubState()
        self._server = _StubServer(self.state)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ServiceStubs:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
