"""The REAL nova-scheduler (nova 34 from PyPI, in .venv-nova) on a seeded cloud, as a baseline.

``tools/nova_venv.sh`` installs nova and the PostgreSQL driver into ``.venv-nova``
(:func:`ensure_nova_venv`). :class:`NovaManagedDB` is a :class:`~tests.support.nova_db.NovaDB`
whose databases nova's own tooling made: fresh PostgreSQL databases with unique names, then
``nova-manage api_db sync``, ``cell_v2 map_cell0``, ``db sync`` (cell0 and cell1),
``db sync --local_cell`` for every further cell and ``cell_v2 create_cell`` for each cell
(on MariaDB too: ``backend="mysql"``). So the schema is nova's full one, not the subset
``NovaDB`` writes, and the seeding helpers (``tests.support.cloud.seed_cloud``) then add the
same rows as for asyncsched's runs.
:class:`NovaChaosStack` is the fault tests' ``ChaosStack`` on such databases: one Placement,
one seeded cloud, served in turn by ``asyncsched serve`` and by ``nova-scheduler``
(:class:`NovaSchedulerProcess`, its own process group, killed as a group).

Importable without nova or pytest; nothing of nova is imported into this process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import uuid as uuidlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from asyncsched.conf.options import PlacementOptions
from tests.support import cloud as seeding
from tests.support import mysql
from tests.support.chaos import ChaosStack
from tests.support.nova_db import ADMIN_DSN, CELL0_UUID, Backend, CellDB, NovaDB, url_for
from tests.support.nova_venv import NOVA_BIN as NOVA_BIN
from tests.support.nova_venv import NOVA_VENV as NOVA_VENV
from tests.support.nova_venv import ROOT as ROOT
from tests.support.nova_venv import _manage as _manage
from tests.support.nova_venv import ensure_nova_venv as ensure_nova_venv
from tests.support.nova_venv import nova_env as nova_env
from tests.support.placement_server import terminate_group
from tests.support.private_broker import PrivateBroker


def nova_service_version() -> int:
    """nova's own ``SERVICE_VERSION``: what a nova 34 nova-compute writes in services.version.
    nova-scheduler refuses to start when a compute is older than it supports."""
    done = subprocess.run(
        [
            str(NOVA_BIN / "python"),
            "-W",
            "ignore",
            "-c",
            "from nova.objects import service; print(service.SERVICE_VERSION)",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        env=nova_env(),
    )
    return int(done.stdout.strip().splitlines()[-1])


class NovaManagedDB(NovaDB):
    """API, cell0 and N cell databases whose schema and cell mappings nova-manage made."""

    backend: Backend = "postgresql"

    def __init__(
        self, work: Path, admin_dsn: str = ADMIN_DSN, *, prefix: str = "asyncsched"
    ) -> None:
        super().__init__(admin_dsn, prefix=prefix)
        self.work = work
        self.manage_conf = work / "nova-manage.conf"
        self.manage_seconds = 0.0

    def url(self, dbname: str) -> str:
        """The URL nova.conf and cell_mappings hold for one of these databases."""
        return url_for(dbname, backend=self.backend)

    @property
    def api_url(self) -> str:
        return self.url(self.api_dbname)

    async def _create_empty(self, dbname: str) -> None:
        admin = await asyncpg.connect(self.admin_dsn)
        try:
            await admin.execute(f'CREATE DATABASE "{dbname}"')
        finally:
            await admin.close()

    async def create(self, n_cells: int = 2) -> NovaDB:
        names = ["cell0", *(f"cell{i + 1}" for i in range(n_cells))]
        for db in [self.api_dbname, *(f"{self.tag}_{n}" for n in names)]:
            await self._create_empty(db)
            self._dbnames.append(db)
        self.work.mkdir(parents=True, exist_ok=True)
        self.manage_conf.write_text(
            "[DEFAULT]\n"
            "debug = False\n"
            "[api_database]\n"
            f"connection = {self.api_url}\n"
            "[database]\n"
            f"connection = {self.url(f'{self.tag}_cell1')}\n"
        )
        t0 = time.monotonic()
        await asyncio.to_thread(self._nova_manage, n_cells)
        self.manage_seconds = time.monotonic() - t0
        rows = await self.api_fetch(
            "SELECT id, uuid, name, database_connection FROM cell_mappings ORDER BY name"
        )
        for r in rows:
            dbname = str(r["database_connection"]).rsplit("/", 1)[1].split("?", 1)[0]
            cell = CellDB(id=r["id"], uuid=r["uuid"], name=r["name"], dbname=dbname)
            if r["uuid"] == CELL0_UUID:
                self.cell0 = cell
            else:
                self.cells.append(cell)
        assert self.cell0 is not None and len(self.cells) == n_cells, rows
        return self

    def _nova_manage(self, n_cells: int) -> None:
        conf = self.manage_conf
        _manage([conf], "api_db", "sync")
        _manage(
            [conf],
            "cell_v2",
            "map_cell0",
            "--database_connection",
            self.url(f"{self.tag}_cell0"),
        )
        _manage([conf], "db", "sync")  # [database] (cell1) and cell0
        for i in range(1, n_cells + 1):
            name = f"cell{i}"
            if i > 1:
                other = self.work / f"{name}.conf"
                other.write_text(f"[database]\nconnection = {self.url(f'{self.tag}_{name}')}\n")
                _manage([conf, other], "db", "sync", "--local_cell")
            # create_cell refuses a transport_url another cell has: one unused vhost per cell
            # (nova-scheduler never talks to a cell's message queue).
            _manage(
                [conf],
                "cell_v2",
                "create_cell",
                "--name",
                name,
                "--database_connection",
                self.url(f"{self.tag}_{name}"),
                "--transport-url",
                f"rabbit://guest:guest@127.0.0.1:5672/{self.tag}_{name}",
            )

    async def set_compute_service_version(self, version: int) -> None:
        """Every seeded nova-compute row at ``version`` (nova's seeding writes an older one)."""
        for cell in self.cells:
            await self.cell_execute(
                cell,
                "UPDATE services SET version = $1 WHERE \"binary\" = 'nova-compute'",
                version,
            )


class MysqlNovaManagedDB(NovaManagedDB):
    """:class:`NovaManagedDB` on MariaDB: nova-manage makes the same databases there
    (``mysql+pymysql://`` URLs, as deployment tools write them); this process reads and writes
    them through PyMySQL (:mod:`tests.support.mysql`)."""

    backend: Backend = "mysql"

    def __init__(self, work: Path, *, prefix: str = "asyncsched") -> None:
        super().__init__(work, prefix=prefix)
        self._mysql_pools: dict[str, mysql.MysqlPool] = {}

    async def _create_empty(self, dbname: str) -> None:
        await asyncio.to_thread(mysql.create_database, dbname)

    async def _pool(self, dbname: str) -> mysql.MysqlPool:
        pool = self._mysql_pools.get(dbname)
        if pool is None:
            pool = self._mysql_pools[dbname] = mysql.MysqlPool(dbname)
        return pool

    async def _close_pool(self, dbname: str) -> None:
        pool = self._mysql_pools.pop(dbname, None)
        if pool is not None:
            await asyncio.to_thread(pool.close)

    async def drop(self) -> None:
        await self.close_pools()
        await asyncio.to_thread(mysql.drop_databases, self._dbnames)


def managed_db(work: Path, backend: Backend, *, prefix: str) -> NovaManagedDB:
    """nova-manage's databases on ``backend``."""
    if backend == "mysql":
        return MysqlNovaManagedDB(work, prefix=prefix)
    return NovaManagedDB(work, prefix=prefix)


#: oslo.messaging reconnect options, as fast as nova's option types allow: ``ChaosStack.daemon``
#: gives asyncsched 0.2 s for all three, but oslo.messaging declares ``rabbit_retry_interval``
#: an integer >= 1 and ``rabbit_retry_backoff`` an integer, and nova-scheduler refuses 0.2.
#: A comparison gives both schedulers these.
FAST_RECONNECT: Mapping[str, Any] = {
    "rabbit_retry_interval": 1,
    "rabbit_retry_backoff": 0,
    "kombu_reconnect_delay": 0.2,
}


def nova_conf_text(
    *,
    transport_url: str,
    api_url: str,
    cell_url: str,
    placement_url: str,
    host: str,
    rabbit: Mapping[str, Any] = FAST_RECONNECT,
) -> str:
    """nova.conf for nova-scheduler, with the values ``ChaosStack.daemon`` gives asyncsched:
    the same filters and subset size, the same Placement timeout, and ``service_down_time``
    high because nothing heartbeats the seeded computes. Placement through keystoneauth's
    ``admin_token`` plugin (noauth2 takes the token ``admin``). ``[oslo_messaging_rabbit]`` is
    ``rabbit``: queues stay nova's defaults (transient) unless it says otherwise."""
    same = seeding.daemon_config(
        transport_url=transport_url,
        api_url=api_url,
        placement=PlacementOptions(),
        scheduler_host=host,
    )
    fs = same.filter_scheduler
    lines = [
        "[DEFAULT]",
        f"transport_url = {transport_url}",
        f"host = {host}",
        "debug = False",
        "service_down_time = 86400",
        "[api_database]",
        f"connection = {api_url}",
        "[database]",
        f"connection = {cell_url}",
        "[placement]",
        "auth_type = admin_token",
        f"endpoint = {placement_url}",
        "token = admin",
        "region_name = RegionOne",
        "valid_interfaces = internal",
        "timeout = 30",
        "[filter_scheduler]",
        f"enabled_filters = {','.join(fs.enabled_filters)}",
        f"host_subset_size = {fs.host_subset_size}",
        "[oslo_messaging_rabbit]",
        *(f"{k} = {v}" for k, v in rabbit.items()),
    ]
    return "\n".join(lines) + "\n"


def queue_consumers(broker: PrivateBroker, queue: str) -> int:
    """How many consumers ``queue`` has on the private node (0 if it does not exist)."""
    for line in broker.ctl("list_queues", "name", "consumers").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == queue and parts[1].isdigit():
            return int(parts[1])
    return 0


def wait_consumed(broker: PrivateBroker, queue: str, count: int, timeout: float) -> float:
    """Block until ``queue`` has at least ``count`` consumers; the seconds it took."""
    t0 = time.monotonic()
    while (n := queue_consumers(broker, queue)) < count:
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"{queue!r} has {n} consumers after {timeout} s, not {count}")
        time.sleep(0.5)
    return time.monotonic() - t0


def nova_worker_count() -> int:
    """nova-scheduler's default ``[scheduler] workers``: one per CPU (oslo processutils)."""
    return os.cpu_count() or 1


def kill_group(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL a process started with ``start_new_session`` and its whole group, and reap it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


class NovaSchedulerProcess:
    """``.venv-nova/bin/nova-scheduler --config-file conf`` in a process group of its own
    (its forked workers with it); everything it prints goes to ``log``."""

    def __init__(self, conf: Path, log: Path) -> None:
        self.conf = conf
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(NOVA_BIN / "nova-scheduler"), "--config-file", str(self.conf)],
                cwd=self.conf.parent,
                env=nova_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_consuming(self, broker: PrivateBroker, workers: int, timeout: float = 180.0) -> float:
        """Block until every worker consumes the ``scheduler`` queue; the seconds it took."""
        t0 = time.monotonic()
        while queue_consumers(broker, "scheduler") < workers:
            if not self.alive():
                raise RuntimeError(f"nova-scheduler exited:\n{self.log_text()[-6000:]}")
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(
                    f"nova-scheduler not consuming after {timeout} s:\n{self.log_text()[-6000:]}"
                )
            time.sleep(0.5)
        return time.monotonic() - t0

    def stop(self) -> None:
        """SIGTERM the group (the parent and its workers), SIGKILL after 10 s."""
        proc, self.proc = self.proc, None
        terminate_group(proc)

    def kill(self) -> None:
        """SIGKILL the group: when nothing it holds matters any more (no graceful stop)."""
        proc, self.proc = self.proc, None
        kill_group(proc)

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except FileNotFoundError:
            return ""


@dataclass
class NovaChaosStack(ChaosStack):
    """``ChaosStack`` on nova-manage-made databases, with nova-scheduler on demand too."""

    novas: list[NovaSchedulerProcess] = field(default_factory=list)
    service_version: int = 0

    def _new_db(self) -> NovaManagedDB:
        return NovaManagedDB(self.tmp / "nova-manage", prefix="asyncsched_chaosnova")

    async def _seeded(self) -> None:
        """nova 34 will not start beside computes older than itself: they get its version."""
        assert isinstance(self.db, NovaManagedDB)
        self.service_version = await asyncio.to_thread(nova_service_version)
        await self.db.set_compute_service_version(self.service_version)

    async def __aexit__(self, *exc: object) -> None:
        for n in self.novas:
            n.stop()
        await super().__aexit__(*exc)

    def nova_scheduler(
        self, transport_url: str, *, rabbit: Mapping[str, Any] = FAST_RECONNECT
    ) -> NovaSchedulerProcess:
        """Start one nova-scheduler for this cloud on ``transport_url`` (not waited for)."""
        name = f"nova-{uuidlib.uuid4().hex[:8]}"
        work = self.tmp / name
        work.mkdir()
        assert self.db.cells, "no cell databases"
        conf = work / "nova.conf"
        conf.write_text(
            nova_conf_text(
                transport_url=transport_url,
                api_url=self.db.api_url,
                cell_url=self.db.cells[0].url,
                placement_url=self.placement.url,
                host=name,
                rabbit=rabbit,
            )
        )
        proc = NovaSchedulerProcess(conf, work / "nova-scheduler.log")
        self.novas.append(proc)
        proc.start()
        return proc
