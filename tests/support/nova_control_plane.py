"""A real nova 34 control plane around a swappable scheduler, driven through nova's REST API.

Everything but the scheduler is unmodified nova 34 from ``.venv-nova``: nova-api (nova's
``osapi_compute`` WSGI app on a threaded ``wsgiref`` server, nova's paste pipeline without the
``authtoken`` filter, so ``NovaKeystoneContext`` builds the context from the ``X-*`` headers
the client sends), nova-conductor, :data:`COMPUTES` nova-compute processes on
``fake.FakeDriverWithoutFakeNodes`` (restartable: the node uuid stays in ``state_path``), cells
v2 made by nova-manage, two availability zones, the real Placement, one throwaway RabbitMQ
vhost and uuid-named PostgreSQL databases. Image and network services are the stubs of
:mod:`tests.support.nova_stubs`. What bites is in shared/reference/nova-control-plane.md.

The scheduler on the ``scheduler`` topic is one of :data:`SCHEDULERS`: the real
nova-scheduler 34, ``asyncsched serve``, or ``asyncsched serve`` with the Placement mirror
(``[placement_database] connection``). :meth:`ControlPlane.use_scheduler` stops the current
one and starts another on the same plane, so one plane serves every scheduler in turn.

Importable without pytest; nothing of nova is imported into this process.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid as uuidlib
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from asyncsched.conf.options import PlacementOptions
from tests.support import broker
from tests.support.cloud import config_file_text, daemon_config
from tests.support.daemon import write_config
from tests.support.net import free_port
from tests.support.nova_db import Backend
from tests.support.nova_scheduler import (
    NOVA_BIN,
    NovaSchedulerProcess,
    _manage,
    ensure_nova_venv,
    kill_group,
    managed_db,
    nova_env,
)
from tests.support.nova_stubs import ServiceStubs
from tests.support.placement_server import PlacementServer, terminate_group
from tests.support.serve_process import ServeProcess

T = TypeVar("T")

#: The four long-lived computes, two per availability zone.
COMPUTES = ("compute1", "compute2", "compute3", "compute4")
ZONES: Mapping[str, tuple[str, ...]] = {"az1": COMPUTES[:2], "az2": COMPUTES[2:]}
#: A compute on ``fake.FakeRescheduleDriver`` (fails the first spawn of every instance), with
#: four times the memory and CPUs of the others: every scheduler's first choice once enabled.
RESCHEDULER = "compute5"
RESCHEDULER_SHAPE: Mapping[str, Any] = {
    "reserved_host_memory_mb": 800000 - 4 * 8192,
    "cpu_allocation_ratio": 64 / 1000,
}
#: What each fake compute offers Placement once reserved amounts are taken off its huge
#: inventory (1000 vCPU, 800000 MB, 600000 GB): 16 VCPU, 8192 MB, 100 GB.
HOST_MEMORY_MB = 8192
SCHEDULERS = ("nova-scheduler", "asyncsched", "asyncsched-mirror")
#: nova's default filters plus the two hint filters (not in nova's default list).
FILTERS = (
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "SameHostFilter",
    "DifferentHostFilter",
)
#: The soft policies' weighers outweigh the resource weighers (each 1.0, normalized: the host
#: already holding a member has the least free RAM, CPU and disk), as operators set them; the
#: same for every scheduler.
#: BuildFailureWeigher off: compute5 reports the build it failed on purpose (nova-compute's
#: ``failed_builds`` stat, kept until a build there succeeds), and would be avoided by every
#: scheduler after the first reschedule scenario of the run.
WEIGHTS: Mapping[str, float] = {
    "soft_affinity_weight_multiplier": 10.0,
    "soft_anti_affinity_weight_multiplier": 10.0,
    "build_failure_weight_multiplier": 0.0,
}
DB_POOL: Mapping[str, int] = {"max_pool_size": 2, "max_overflow": 4}
REPORT_INTERVAL = 1
SERVICE_DOWN_TIME = 6
MICROVERSION = "2.95"
PROJECT = "6f70656e737461636b20697320636f6f"
USER = "7573657220697320636f6f6c21212121"

_API_SCRIPT = """
import os
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from nova.wsgi.osapi_compute import application

class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True

class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass

port = int(os.environ["NOVA_API_PORT"])
make_server("127.0.0.1", port, application, Server, Quiet).serve_forever()
"""


class ControlPlaneError(RuntimeError):
    """A nova service did not start or answer as expected (the harness, not the test)."""


@dataclass(frozen=True, slots=True)
class ApiError(Exception):
    """nova-api answered ``status`` (>= 400) to ``method path``."""

    method: str
    path: str
    status: int
    body: str

    def __str__(self) -> str:
        return f"{self.method} {self.path} -> {self.status}: {self.body[:2000]}"


#: :func:`poll`'s first pause and its longest: most waits end within a second (a boot, a
#: deletion), so the first probes come quickly; a long wait costs a probe every 0.25 s.
POLL_FIRST, POLL_MAX = 0.05, 0.25


def poll(what: str, probe: Callable[[], T | None], timeout: float = 90.0) -> T:
    """``probe()`` until it returns something not None, pausing 0.05 s and then half as long
    again each time up to 0.25 s; TimeoutError after ``timeout`` (a guard, not a bound)."""
    deadline = time.monotonic() + timeout
    pause = POLL_FIRST
    while True:
        got = probe()
        if got is not None:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(pause)
        pause = min(pause * 1.5, POLL_MAX)


def _http(method: str, url: str, headers: Mapping[str, str], body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers))
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        status = exc.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


class NovaClient:
    """nova's REST API as an admin, with the headers ``NovaKeystoneContext`` reads."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.headers = {
            "X-Auth-Token": "admin",
            "X-User-Id": USER,
            "X-Project-Id": PROJECT,
            "X-Roles": "admin,member,reader",
            "X-Tenant-Name": "admin",
            "X-User-Name": "admin",
            "OpenStack-API-Version": f"compute {MICROVERSION}",
        }

    def call(self, method: str, path: str, body: Any = None, *, version: str = MICROVERSION) -> Any:
        headers = dict(self.headers, **{"OpenStack-API-Version": f"compute {version}"})
        status, data = _http(method, self.url + path, headers, body)
        if status >= 400:
            raise ApiError(method, path, status, json.dumps(data) if data else "")
        return data

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any, *, version: str = MICROVERSION) -> Any:
        return self.call("POST", path, body, version=version)

    def action(self, server: str, body: Mapping[str, Any], *, version: str = MICROVERSION) -> Any:
        return self.post(f"/servers/{server}/action", dict(body), version=version)


class PlacementReader:
    """Placement's allocations and usages, as the test checks them afterwards."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.28"}

    def get(self, path: str) -> Any:
        status, data = _http("GET", self.url + path, self.headers)
        if status >= 400:
            raise ControlPlaneError(f"Placement GET {path} -> {status}: {data}")
        return data

    def allocations(self, consumer: str) -> dict[str, dict[str, int]]:
        """{provider uuid: resources} of one consumer ({} when it holds nothing)."""
        data = self.get(f"/allocations/{consumer}")["allocations"]
        return {rp: dict(a["resources"]) for rp, a in data.items()}

    def providers(self) -> dict[str, str]:
        """{name: uuid} of every resource provider."""
        return {p["name"]: p["uuid"] for p in self.get("/resource_providers")["resource_providers"]}

    def used(self) -> dict[str, dict[str, int]]:
        """{provider name: non-zero usages}."""
        out: dict[str, dict[str, int]] = {}
        for name, rp in self.providers().items():
            usages = self.get(f"/resource_providers/{rp}/usages")["usages"]
            nonzero = {rc: n for rc, n in usages.items() if n}
            if nonzero:
                out[name] = nonzero
        return out


class NovaProcess:
    """One nova service in its own process group; output in ``log``."""

    def __init__(self, name: str, argv: list[str], log: Path, env: Mapping[str, str]) -> None:
        self.name = name
        self.argv = argv
        self.log = log
        self.env = dict(env)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv,
                cwd=self.log.parent,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        terminate_group(proc)

    def kill(self) -> None:
        """SIGKILL the group and reap it: the service dies with no goodbye."""
        proc, self.proc = self.proc, None
        kill_group(proc)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


def nova_conf(
    *, transport_url: str, api_url: str, cell_url: str, placement_url: str, stubs_url: str
) -> str:
    """The nova.conf every nova service of the plane shares."""
    fake_vcpus, fake_ram, fake_disk_gb = 1000, 800000, 600000
    sections: dict[str, dict[str, Any]] = {
        "DEFAULT": {
            "transport_url": transport_url,
            "debug": False,
            "compute_driver": "fake.FakeDriverWithoutFakeNodes",
            "report_interval": REPORT_INTERVAL,
            "service_down_time": SERVICE_DOWN_TIME,
            "sync_power_state_interval": -1,
            "heal_instance_info_cache_interval": -1,
            "shelved_offload_time": -1,
            "allow_resize_to_same_host": False,
            "cpu_allocation_ratio": 16 / fake_vcpus,
            "ram_allocation_ratio": 1.0,
            "disk_allocation_ratio": 1.0,
            "reserved_host_memory_mb": fake_ram - HOST_MEMORY_MB,
            "reserved_host_disk_mb": (fake_disk_gb - 100) * 1024,
            "instance_usage_audit": False,
            "use_rootwrap_daemon": False,
        },
        # Small pools: PostgreSQL's 100 connections are shared with every other test run.
        "api_database": {"connection": api_url, **DB_POOL},
        "database": {"connection": cell_url, **DB_POOL},
        "conductor": {"workers": 1},
        "scheduler": {"workers": 1, "discover_hosts_in_cells_interval": -1},
        "filter_scheduler": {"enabled_filters": ",".join(FILTERS), **WEIGHTS},
        "quota": {"driver": "nova.quota.NoopQuotaDriver"},
        "oslo_concurrency": {"lock_path": "locks"},
        "api": {"list_records_by_skipping_down_cells": False},
        "placement": {
            "auth_type": "admin_token",
            "endpoint": placement_url,
            "token": "admin",
            "region_name": "RegionOne",
        },
        "glance": {
            "auth_type": "admin_token",
            "endpoint": f"{stubs_url}/image",
            "token": "admin",
            "endpoint_override": f"{stubs_url}/image",
            "num_retries": 0,
        },
        "neutron": {
            "auth_type": "admin_token",
            "endpoint": f"{stubs_url}/network",
            "token": "admin",
            "endpoint_override": f"{stubs_url}/network",
        },
        "oslo_messaging_rabbit": {"rabbit_retry_interval": 1, "kombu_reconnect_delay": 0.2},
        "os_vif_linux_bridge": {},
    }
    lines: list[str] = []
    for name, opts in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {v}" for k, v in opts.items()]
    return "\n".join(lines) + "\n"


def paste_without_authtoken() -> str:
    """nova's own api-paste.ini with the ``authtoken`` filter taken out of every pipeline."""
    text = (NOVA_BIN.parent / "etc" / "nova" / "api-paste.ini").read_text()
    return text.replace(" authtoken keystonecontext", " keystonecontext")


class ControlPlane:
    """The whole plane: :meth:`start`, then :meth:`use_scheduler`, the API, :meth:`stop`."""

    def __init__(self, work: Path, backend: Backend = "postgresql") -> None:
        self.work = work
        self.vhost = f"asyncsched-nova-{uuidlib.uuid4().hex[:12]}"
        self.transport_url = broker.amqp_url(self.vhost)
        # nova's and Placement's databases on one server: PostgreSQL or MariaDB (issue #25)
        self.placement = PlacementServer(db_backend=backend)
        self.stubs = ServiceStubs()
        self.db = managed_db(work / "nova-manage", backend, prefix="asyncsched_e2enova")
        self.conf = work / "nova.conf"
        self.computes: dict[str, NovaProcess] = {}
        self.others: list[NovaProcess] = []
        self.scheduler: NovaSchedulerProcess | ServeProcess | None = None
        self.scheduler_kind = ""
        self._api: NovaClient | None = None
        self._same_host_api: NovaClient | None = None
        self.image = ""
        self.image2 = ""
        self.startup_seconds = 0.0

    # --- bring-up ---------------------------------------------------------------------

    @property
    def api(self) -> NovaClient:
        assert self._api is not None, "start() first"
        return self._api

    @property
    def placement_reader(self) -> PlacementReader:
        return PlacementReader(self.placement.url)

    def start(self) -> ControlPlane:
        t0 = time.monotonic()
        ensure_nova_venv()
        broker.add_vhost(self.vhost)
        self.stubs.start()
        self.image = self.stubs.state.add_image("cirros")
        self.image2 = self.stubs.state.add_image("cirros-rebuilt")
        # Placement's schema and gunicorn beside nova-manage's (each a single-core job).
        with ThreadPoolExecutor(1) as pool:
            placement = pool.submit(self.placement.start, 180.0)
            asyncio.run(self._databases())
            placement.result()
        cell = self.db.cells[0]
        self.conf.write_text(
            nova_conf(
                transport_url=self.transport_url,
                api_url=self.db.api_url,
                cell_url=self.db.url(cell.dbname),
                placement_url=self.placement.url,
                stubs_url=self.stubs.url,
            )
        )
        (self.work / "locks").mkdir(exist_ok=True)
        (self.work / "api-paste.ini").write_text(paste_without_authtoken())
        # The conductor and the computes start while nova-api does (none needs the API).
        self.others.append(self._start_service("conductor", "nova-conductor"))
        for host in COMPUTES:
            self.start_compute(host)
        self.start_compute(RESCHEDULER, "fake.FakeRescheduleDriver", **RESCHEDULER_SHAPE)
        self._start_apis()
        self.wait_computes_up((*COMPUTES, RESCHEDULER), timeout=240)
        self.discover_hosts()
        # Held out of every scenario but the reschedule one, which enables it.
        self.set_service(RESCHEDULER, status="disabled", disabled_reason="reschedule only")
        self._zones()
        self._flavors()
        self.startup_seconds = time.monotonic() - t0
        return self

    async def _databases(self) -> None:
        """nova-manage's databases; cell1's transport URL is this plane's vhost (the conductor
        and the computes of cell1 talk there)."""
        await self.db.create(n_cells=1)
        await self.db.api_execute(
            "UPDATE cell_mappings SET transport_url = $1 WHERE uuid = $2",
            self.transport_url,
            self.db.cells[0].uuid,
        )
        await self.db.close_pools()  # they belong to this asyncio.run's loop

    def _launch_api(self, name: str, *extra_conf: str) -> tuple[NovaProcess, NovaClient]:
        """Start nova-api ``name`` on a free port (``extra_conf``: more files in the work dir,
        read after nova.conf); its process and client (:meth:`_await_api` waits for it)."""
        script = self.work / "nova_api_wsgi.py"
        script.write_text(_API_SCRIPT)
        port = free_port()
        env = dict(
            nova_env(),
            OS_NOVA_CONFIG_DIR=str(self.work),
            OS_NOVA_CONFIG_FILES=";".join(["api-paste.ini", "nova.conf", *extra_conf]),
            NOVA_API_PORT=str(port),
        )
        proc = NovaProcess(
            name,
            [str(NOVA_BIN / "python"), "-W", "ignore", str(script)],
            self.work / f"{name}.log",
            env,
        )
        proc.start()
        self.others.append(proc)
        return proc, NovaClient(f"http://127.0.0.1:{port}/v2.1")

    @staticmethod
    def _await_api(proc: NovaProcess, client: NovaClient) -> NovaClient:
        """``client`` once its nova-api answers."""

        def answers() -> bool | None:
            if not proc.alive():
                raise ControlPlaneError(f"{proc.name} exited:\n{proc.log_tail()}")
            try:
                client.get("/flavors")
            except (OSError, ApiError):
                return None
            return True

        poll(f"{proc.name} answering", answers, timeout=180)
        return client

    def _start_apis(self) -> None:
        """nova-api, and a second one with ``allow_resize_to_same_host = True`` (nova reads it
        in the API only, for :meth:`same_host_api`), started side by side."""
        (self.work / "same-host.conf").write_text("[DEFAULT]\nallow_resize_to_same_host = True\n")
        api = self._launch_api("nova-api")
        same_host = self._launch_api("nova-api-same-host", "same-host.conf")
        self._api = self._await_api(*api)
        self._same_host_api = self._await_api(*same_host)

    def same_host_api(self) -> NovaClient:
        """The nova-api with ``allow_resize_to_same_host = True``."""
        assert self._same_host_api is not None, "start() first"
        return self._same_host_api

    def _start_service(self, name: str, binary: str, *extra_conf: Path) -> NovaProcess:
        argv = [str(NOVA_BIN / binary), "--config-file", str(self.conf)]
        for c in extra_conf:
            argv += ["--config-file", str(c)]
        proc = NovaProcess(name, argv, self.work / f"{name}.log", nova_env())
        proc.start()
        return proc

    def start_compute(
        self,
        host: str,
        driver: str = "fake.FakeDriverWithoutFakeNodes",
        **options: Any,
    ) -> None:
        """Start (or restart) nova-compute ``host`` with its own state_path; ``options`` go
        to its ``[DEFAULT]`` (e.g. another shape of the fake inventory)."""
        state = self.work / host
        state.mkdir(exist_ok=True)
        overlay = self.work / f"{host}.conf"
        overlay.write_text(
            f"[DEFAULT]\nhost = {host}\nstate_path = {state}\ncompute_driver = {driver}\n"
            f"instances_path = {state / 'instances'}\n"
            + "".join(f"{k} = {v}\n" for k, v in options.items())
        )
        old = self.computes.get(host)
        if old is not None:
            old.stop()
        self.computes[host] = self._start_service(host, "nova-compute", overlay)

    def kill_compute(self, host: str) -> None:
        """The host dies (SIGKILL): no graceful stop to wait for; :meth:`reset_services`
        starts it again."""
        proc = self.computes.pop(host, None)
        if proc is not None:
            proc.kill()

    def zone_of(self, host: str) -> str:
        return next(zone for zone, hosts in ZONES.items() if host in hosts)

    def services(self) -> dict[str, dict[str, Any]]:
        """{host: os-services row} of the nova-compute services."""
        rows = self.api.get("/os-services?binary=nova-compute")["services"]
        return {r["host"]: r for r in rows}

    def set_service(self, host: str, **fields: Any) -> None:
        """PUT /os-services/{id} (2.53): ``status`` enabled/disabled, ``forced_down``."""
        sid = self.services()[host]["id"]
        self.api.call("PUT", f"/os-services/{sid}", fields, version="2.53")

    def reset_services(self) -> None:
        """Every long-lived compute running, enabled and not forced down."""
        for host, row in self.services().items():
            if host not in COMPUTES:
                continue
            if host not in self.computes:
                self.start_compute(host)
            if row["forced_down"]:
                # nova refuses while evacuations from the host are "done", until the restarted
                # compute has cleaned them up ("completed").
                poll(f"{host} forced up", partial(self._force_up, host), timeout=120)
            if row["status"] != "enabled":
                self.set_service(host, status="enabled")
        for proc in self.computes.values():
            proc.signal(signal.SIGCONT)
        self.wait_computes_up(COMPUTES)

    def _force_up(self, host: str) -> bool | None:
        try:
            self.set_service(host, forced_down=False)
        except ApiError as exc:
            if exc.status != 400:
                raise
            return None
        return True

    def wait_computes_up(self, hosts: tuple[str, ...], timeout: float = 90.0) -> None:
        def up() -> bool | None:
            for h in hosts:
                proc = self.computes.get(h)
                if proc is not None and not proc.alive():
                    raise ControlPlaneError(f"{h} exited:\n{proc.log_tail()}")
            rows = self.services()
            ok = all(h in rows and rows[h]["state"] == "up" for h in hosts)
            return True if ok and self._providers_ready(hosts) else None

        poll(f"computes {hosts} up", up, timeout=timeout)

    def _providers_ready(self, hosts: tuple[str, ...]) -> bool:
        have = self.placement_reader.providers()
        return all(h in have for h in hosts)

    def discover_hosts(self) -> None:
        _manage([self.conf], "cell_v2", "discover_hosts")

    def _zones(self) -> None:
        for zone, hosts in ZONES.items():
            agg = self.api.post(
                "/os-aggregates", {"aggregate": {"name": zone, "availability_zone": zone}}
            )
            for h in hosts:
                self.api.post(
                    f"/os-aggregates/{agg['aggregate']['id']}/action", {"add_host": {"host": h}}
                )

    def _flavors(self) -> None:
        for name, ram, vcpus, disk in (
            ("small", 512, 1, 1),
            ("medium", 2048, 2, 5),
            ("large", 4096, 2, 10),
            ("huge", 6144, 4, 10),
            ("toobig", 2 * HOST_MEMORY_MB, 4, 10),
        ):
            self.api.post(
                "/flavors",
                {"flavor": {"name": name, "ram": ram, "vcpus": vcpus, "disk": disk, "id": name}},
            )

    # --- the scheduler ------------------------------------------------------------------

    def use_scheduler(self, kind: str) -> None:
        """Stop the current scheduler and start ``kind`` on the ``scheduler`` topic."""
        self.stop_scheduler()
        folder = self.work / kind
        folder.mkdir(exist_ok=True)
        if kind == "nova-scheduler":
            nova = NovaSchedulerProcess(self.conf, folder / "nova-scheduler.log")
            nova.start()
            self.scheduler = nova
            self._wait_consumer(nova.alive, nova.log_text)
        else:
            serve = ServeProcess(
                self._asyncsched_conf(folder, mirror=kind.endswith("mirror")), folder / "stderr.log"
            )
            serve.start()
            self.scheduler = serve
            serve.wait_ready(120)
        self.scheduler_kind = kind

    def _wait_consumer(self, alive: Callable[[], bool], log: Callable[[], str]) -> None:
        def consuming() -> bool | None:
            if not alive():
                raise ControlPlaneError(f"scheduler exited:\n{log()[-6000:]}")
            rows = broker.list_json("list_queues", self.vhost, "name", "consumers")
            return True if any(r["name"] == "scheduler" and r["consumers"] for r in rows) else None

        poll("scheduler consuming", consuming, timeout=180)

    def _asyncsched_conf(self, folder: Path, *, mirror: bool) -> Path:
        config = daemon_config(
            transport_url=self.transport_url,
            api_url=self.db.api_url,
            placement=PlacementOptions(
                auth_type="none", endpoint_override=self.placement.url, timeout=30.0
            ),
            scheduler_host=f"asyncsched-{folder.name}",
            enabled_filters=FILTERS,
            service_down_time=SERVICE_DOWN_TIME,
        )
        conf = write_config(folder, config)
        extra = ["[DEFAULT]", f"report_interval = {REPORT_INTERVAL}"]
        extra += ["[filter_scheduler]", *(f"{k} = {v}" for k, v in WEIGHTS.items())]
        if mirror:
            extra += [
                "[placement_database]",
                f"connection = {self.placement.db_url}",
            ]
        text = config_file_text(config)
        conf.write_text(_merge_ini(text, extra))
        return conf

    def scheduler_log(self) -> str:
        s = self.scheduler
        if isinstance(s, NovaSchedulerProcess):
            return s.log_text()
        if isinstance(s, ServeProcess):
            return s.stderr()
        return ""

    def stop_scheduler(self) -> None:
        """Kill the scheduler (the plane's requests are all answered by then; a graceful
        stop of nova-scheduler waits for nothing but costs seconds)."""
        s, self.scheduler = self.scheduler, None
        if isinstance(s, NovaSchedulerProcess):
            s.kill()
        elif s is not None:
            s.stop()  # ServeProcess.stop: SIGKILL

    # --- tear-down ----------------------------------------------------------------------

    def logs(self) -> str:
        """The tails of every log (printed when a scenario fails)."""
        parts = [f"--- {self.scheduler_kind} ---\n{self.scheduler_log()[-6000:]}"]
        for p in [*self.others, *self.computes.values()]:
            parts.append(f"--- {p.name} ---\n{p.log_tail(3000)}")
        return "\n".join(parts)

    def stop(self) -> None:
        """Kill every process of the plane (nothing of it outlives it: a graceful stop waited
        up to 10 s for each nova service in turn), then drop its databases and vhost."""
        self.stop_scheduler()
        for p in [*self.computes.values(), *self.others]:
            p.kill()
        self.computes.clear()
        self.stubs.stop()
        self.placement.stop()
        try:
            asyncio.run(self.db.drop())
        finally:
            broker.delete_vhost(self.vhost)


def _merge_ini(text: str, extra: list[str]) -> str:
    """``text`` with the lines of ``extra`` added under their section headers."""
    out = text.splitlines()
    section = ""
    for line in extra:
        if line.startswith("["):
            section = line
            if section not in out:
                out.append(section)
            continue
        out.insert(out.index(section) + 1, line)
    return "\n".join(out) + "\n"
