"""Server operations through nova's REST API, and what Placement holds afterwards.

Everything a scenario does goes through nova-api (and so through nova-conductor and the
scheduler under test); Placement is only read, to check the allocations each operation leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.support.nova_control_plane import ApiError, ControlPlane, poll

#: What each flavor of the plane claims in Placement.
FLAVORS: Mapping[str, Mapping[str, int]] = {
    "small": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 1},
    "medium": {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 5},
    "large": {"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 10},
    "huge": {"VCPU": 4, "MEMORY_MB": 6144, "DISK_GB": 10},
}
HOST = "OS-EXT-SRV-ATTR:host"
TIMEOUT = 120.0
FAILED_MIGRATION = frozenset({"error", "failed"})
#: DELETE requests in flight at once (nova-api serves each in a thread of its own).
DELETERS = 4


class Servers:
    """Boot, act on, wait for and delete servers on one plane; read their allocations."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.api = plane.api
        self.placement = plane.placement_reader
        self.created: list[str] = []

    # --- boot ---------------------------------------------------------------------------

    def boot(
        self,
        name: str,
        flavor: str = "small",
        *,
        count: int = 1,
        hints: Mapping[str, Any] | None = None,
        zone: str | None = None,
        wait: str | None = "ACTIVE",
    ) -> list[str]:
        """Boot ``count`` servers in one request; wait until each is ``wait`` (None: don't)."""
        server: dict[str, Any] = {
            "name": name,
            "imageRef": self.plane.image,
            "flavorRef": flavor,
            "networks": "none",
        }
        if count > 1:
            server.update(min_count=count, max_count=count, return_reservation_id=True)
        if zone:
            server["availability_zone"] = zone
        body: dict[str, Any] = {"server": server}
        if hints:
            body["os:scheduler_hints"] = dict(hints)
        answer = self.api.post("/servers", body)
        if count > 1:
            rid = answer["reservation_id"]
            listed = self.api.get(f"/servers?reservation_id={rid}")["servers"]
            ids = [s["id"] for s in listed]
        else:
            ids = [answer["server"]["id"]]
        assert len(ids) == count, ids
        self.created += ids
        if wait is not None:
            for sid in ids:
                self.wait(sid, wait)
        return ids

    def group(self, policy: str, rules: Mapping[str, int] | None = None) -> str:
        body: dict[str, Any] = {"name": f"g-{policy}", "policy": policy}
        if rules:
            body["rules"] = dict(rules)
        return str(self.api.post("/os-server-groups", {"server_group": body})["server_group"]["id"])

    # --- state --------------------------------------------------------------------------

    def show(self, sid: str) -> dict[str, Any]:
        server: dict[str, Any] = self.api.get(f"/servers/{sid}")["server"]
        return server

    def host(self, sid: str) -> str:
        return str(self.show(sid)[HOST])

    def wait(self, sid: str, status: str, *, timeout: float = TIMEOUT) -> dict[str, Any]:
        """Poll until the server is ``status`` with no task running; fail fast on ERROR."""

        def probe() -> dict[str, Any] | None:
            s = self.show(sid)
            if s["status"] == "ERROR" and status != "ERROR":
                raise AssertionError(f"{sid} went to ERROR: {s.get('fault')}")
            if s["status"] == status and s.get("OS-EXT-STS:task_state") is None:
                return s
            return None

        return poll(f"server {sid} {status}", probe, timeout)

    def action(self, sid: str, body: Mapping[str, Any], *, version: str | None = None) -> Any:
        if version is None:
            return self.api.action(sid, body)
        return self.api.action(sid, body, version=version)

    def migrations(self, sid: str) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.api.call(
            "GET", f"/os-migrations?instance_uuid={sid}", version="2.80"
        )["migrations"]
        return rows

    def wait_migration(self, sid: str, count: int, status: str) -> dict[str, Any]:
        """The newest of ``count`` migrations of ``sid`` once it is ``status``."""

        def probe() -> dict[str, Any] | None:
            rows = sorted(self.migrations(sid), key=lambda m: m["id"])
            if len(rows) >= count and rows[-1]["status"] == status:
                return rows[-1]
            if len(rows) >= count and rows[-1]["status"] in FAILED_MIGRATION - {status}:
                raise AssertionError(f"migration of {sid} {rows[-1]['status']}: {rows[-1]}")
            return None

        return poll(f"migration {count} of {sid} {status}", probe, TIMEOUT)

    # --- placement ----------------------------------------------------------------------

    def allocations(self, consumer: str) -> dict[str, dict[str, int]]:
        """{host name: resources} the consumer holds in Placement."""
        names = {uuid: name for name, uuid in self.placement.providers().items()}
        return {names.get(rp, rp): r for rp, r in self.placement.allocations(consumer).items()}

    def assert_allocated(self, sid: str, host: str, flavor: str = "small") -> None:
        """The server holds exactly its flavor on its host, nothing anywhere else."""
        assert self.allocations(sid) == {host: dict(FLAVORS[flavor])}

    # --- clean-up -----------------------------------------------------------------------

    def delete(self, ids: Iterable[str]) -> None:
        """Delete the servers (the requests side by side) and wait until they are gone (and
        hold nothing): the next scenario's usage checks see none of them."""
        ids = list(ids)
        with ThreadPoolExecutor(DELETERS) as pool:
            list(pool.map(self._request_delete, ids))
        for sid in ids:
            poll(f"{sid} deleted", self._gone_probe(sid), TIMEOUT)
            assert self.allocations(sid) == {}, sid

    def _request_delete(self, sid: str) -> None:
        try:
            self.api.call("DELETE", f"/servers/{sid}")
        except ApiError as exc:
            if exc.status != 404:
                raise

    def _gone_probe(self, sid: str) -> Callable[[], bool | None]:
        return lambda: True if self._gone(sid) else None

    def _gone(self, sid: str) -> bool:
        try:
            self.show(sid)
        except ApiError as exc:
            return exc.status == 404
        return False

    def delete_created(self) -> None:
        ids, self.created = self.created, []
        self.delete(ids)
