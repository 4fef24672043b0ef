"""Candidates from the Placement mirror vs ``GET /allocation_candidates``, end to end.

A real Placement (openstack-placement, gunicorn with 2 workers, PostgreSQL) with ``--providers``
compute-node providers COPYed straight into its database (Placement's own API then reads a
sample back unchanged), nova databases with the same hosts, and ``asyncsched serve`` as a
subprocess, called through the real oslo.messaging RPCClient as nova-conductor calls it. The
same daemon runs twice in the same run: mirror on (``[placement_database] connection``) and
mirror off (every request asks Placement). Placement's own claim rate (``PUT /allocations`` at
``claim_concurrency``, and claims sharing ``POST /allocations`` as the daemon sends them) is
printed beside them: it is the floor of any multi-create.

Then how the mirror grows (``--growth``): load time, memory, refresh cost (idle and while
claims land), lag (a claim through Placement's API until the mirror shows it) and the local
candidates time, with Placement's GET time at the same size.

    .venv/bin/python -m bench.bench_candidates [--providers 10000] [--growth 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid as uuidlib
import warnings
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import asyncpg

from asyncsched.exceptions import PlacementError
from asyncsched.objects.models import RequestGroup
from asyncsched.placement.client import PlacementClient
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import LocalCandidates
from asyncsched.state.placement_mirror import PlacementMirror
from bench.cpu_share import (
    CpuMeter,
    Pids,
    machine_busy_s,
    me,
    pg_backends_of,
    pg_connections,
    tree,
)
from bench.nova_seed import copy_hosts, copy_instances
from bench.pg_upkeep import production_upkeep, vacuum_seeded
from bench.placement_seed import (
    INSTANCE,
    TRAITS,
    SeededProvider,
    plan,
    seed,
    seed_allocations,
    verify_allocations,
    verify_readback,
)
from tests.support import broker
from tests.support.cloud import config_file_text, daemon_config, decode_reply
from tests.support.notify_listener import NotifyListener
from tests.support.nova_db import NodeSpec, NovaDB
from tests.support.oslo_caller import OsloSchedulerClient, request_spec_primitive
from tests.support.placement_server import PlacementServer

warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parents[1]
FLAVOR: dict[str, Any] = {"vcpus": 2, "memory_mb": 4096, "root_gb": 40}
#: the boots' flavors, taken in turn by every boot of the run (``--flavors``)
FLAVORS: list[dict[str, Any]] = [FLAVOR]
_TURNS = itertools.count()


def flavor_mix(n: int) -> list[dict[str, Any]]:
    """FLAVOR and ``n - 1`` smaller ones (512 MB less each, one or two vCPUs), so every
    host FLAVOR fits on fits them all: a mix of flavors, each one its own query."""
    return [
        {**FLAVOR, "vcpus": FLAVOR["vcpus"] - k % 2, "memory_mb": FLAVOR["memory_mb"] - 512 * k}
        for k in range(n)
    ]


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def spec(n: int, tenant: tuple[str, str] | None = None) -> dict[str, Any]:
    """A boot of ``n`` instances; ``tenant`` (project, user) or a new one for this boot."""
    who: dict[str, Any] = {} if tenant is None else {"project_id": tenant[0], "user_id": tenant[1]}
    flavor = FLAVORS[next(_TURNS) % len(FLAVORS)]
    return request_spec_primitive(num_instances=n, group_policy=None, **flavor, **who)


# ---- the daemon, as systemd runs it ----------------------------------------------------------


class Serve:
    def __init__(self, conf: Path, log: Path, health: Path, root: Path = ROOT) -> None:
        self.conf, self.log, self.health_path = conf, log, health
        self.root = root  # the checkout the daemon runs from (``--ab-tree``: another one)
        self.listener = NotifyListener()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 1200.0) -> float:
        """Start the daemon; seconds until it tells systemd READY=1 (at most ``timeout``)."""
        env = dict(os.environ, NOTIFY_SOCKET=self.listener.address, PYTHONUNBUFFERED="1")
        if self.root != ROOT:
            env["PYTHONPATH"] = str(self.root)
        t0 = time.monotonic()
        with open(self.log, "wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "asyncsched", "serve", "--config-file", str(self.conf)],
                cwd=self.root,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        deadline = t0 + timeout
        while True:  # in slices: a daemon that died is told at once, with its log's end
            left = deadline - time.monotonic()
            try:
                self.listener.wait_for("READY", "1", max(0.1, min(15.0, left)))
                return time.monotonic() - t0
            except TimeoutError:
                if self.proc.poll() is not None or left <= 15.0:
                    why = "exited" if self.proc.poll() is not None else f"not READY in {timeout} s"
                    raise RuntimeError(f"daemon {why}; its log ends:\n{self.log_tail()}") from None

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def rss_mb(self) -> float:
        """The daemon's resident set (VmRSS), MiB."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_s(self) -> float:
        """The daemon's CPU seconds so far (user + system, from /proc: load-independent)."""
        assert self.proc is not None
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def health(self) -> dict[str, Any]:
        for _ in range(50):
            try:
                data: dict[str, Any] = json.loads(self.health_path.read_text())
                return data
            except (OSError, ValueError):
                time.sleep(0.1)
        return {}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class Callers:
    """One oslo.messaging client per calling thread, as separate conductor workers have.

    With ``projects`` > 0 each thread boots for one of that many tenants (project and user,
    the k-th thread for tenant k mod ``projects``), as a cloud's boots mostly come from
    tenants Placement already knows; with 0 every boot is a new tenant's first, which costs
    Placement two more rows (and transactions) per claim."""

    def __init__(self, url: str, projects: int = 0) -> None:
        self.url = url
        self.tenants = [(uuidlib.uuid4().hex, uuidlib.uuid4().hex) for _ in range(projects)]
        self._local = threading.local()
        self._all: list[OsloSchedulerClient] = []
        self._lock = threading.Lock()

    def client(self) -> OsloSchedulerClient:
        c = getattr(self._local, "client", None)
        if c is None:
            c = OsloSchedulerClient(self.url, timeout=600.0, call_monitor_timeout=None)
            self._local.client = c
            with self._lock:
                if self.tenants:
                    self._local.tenant = self.tenants[len(self._all) % len(self.tenants)]
                self._all.append(c)
        return c

    def boot(self, n: int) -> tuple[float, Any]:
        uuids = [str(uuidlib.uuid4()) for _ in range(n)]
        c = self.client()
        t0 = time.perf_counter()
        reply = c.select_destinations(spec(n, getattr(self._local, "tenant", None)), uuids)
        return time.perf_counter() - t0, (uuids, reply)

    def close(self) -> None:
        """Close every client at once (oslo.messaging takes seconds to close each one)."""
        with ThreadPoolExecutor(max(1, len(self._all))) as pool:
            list(pool.map(lambda c: c.close(), self._all))


async def claimed(dsn: str, uuids: list[str]) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        n = await conn.fetchval(
            "SELECT count(DISTINCT consumer_id) FROM allocations WHERE consumer_id = ANY($1)",
            uuids,
        )
        return int(n)
    finally:
        await conn.close()


def metrics_text(port: int) -> str:
    """The daemon's /metrics page (OSError when it cannot be read)."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text: str = r.read().decode()
    return text


def phase_sums(port: int) -> dict[str, tuple[float, float]]:
    """(seconds, requests) of each select_destinations phase so far (candidates, and of it
    services: the wait for the fresh services reads after the candidates came; decide; claim;
    reply), from the daemon's /metrics."""
    try:
        text = metrics_text(port)
    except OSError:
        return {}
    name = "asyncsched_select_destinations_phase_seconds_"
    out: dict[str, tuple[float, float]] = {}
    for line in text.splitlines():
        for part, i in (("sum", 0), ("count", 1)):
            if line.startswith(f"{name}{part}{{"):
                phase = line.split('phase="', 1)[1].split('"', 1)[0]
                got = list(out.get(phase, (0.0, 0.0)))
                got[i] = float(line.rsplit(" ", 1)[1])
                out[phase] = (got[0], got[1])
    return out


def phase_means_ms(
    before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]]
) -> dict[str, float]:
    """Mean milliseconds per request of each phase between two ``phase_sums``."""
    out = {}
    for phase, (s, n) in after.items():
        s0, n0 = before.get(phase, (0.0, 0.0))
        if n > n0:
            out[phase] = round((s - s0) / (n - n0) * 1000, 1)
    return out


def refresh_means(port: int) -> dict[str, Any]:
    """Mean and count of the host-state passes by kind (full/incremental), over every cell,
    from the daemon's /metrics."""
    try:
        text = metrics_text(port)
    except OSError as exc:
        return {"error": str(exc)}
    sums: dict[str, list[float]] = {}
    for line in text.splitlines():
        name = "asyncsched_host_state_refresh_duration_seconds_"
        if not line.startswith(name) or 'cell="api"' in line:
            continue
        kind = line.split('kind="', 1)[1].split('"', 1)[0]
        acc = sums.setdefault(kind, [0.0, 0.0])
        if line.startswith(name + "sum"):
            acc[0] += float(line.rsplit(" ", 1)[1])
        elif line.startswith(name + "count"):
            acc[1] += float(line.rsplit(" ", 1)[1])
    return {
        k: {"passes": int(n), "mean_ms": round(t / n * 1000, 1) if n else None}
        for k, (t, n) in sums.items()
    }


def pg_in_use() -> tuple[int, int]:
    """(connections PostgreSQL serves now, its max_connections), everyone's."""
    import psycopg2

    conn = psycopg2.connect(host="127.0.0.1", user="root", dbname="postgres")
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT count(*), current_setting('max_connections')::int FROM pg_stat_activity"
            )
            used, most = cur.fetchone()
            return int(used), int(most)
    finally:
        conn.close()


def connections(serve: Serve, server: PlacementServer) -> dict[str, int]:
    """PostgreSQL connections held by the daemon, Placement's gunicorn, this bench, and all."""
    gunicorn = getattr(server, "_proc", None)
    used, most = pg_in_use()
    return {
        "daemon": pg_connections([serve.proc.pid] if serve.proc else []),
        "placement": pg_connections(tree(gunicorn.pid) if gunicorn else []),
        "bench": pg_connections(me()),
        "server_total": used,
        "max_connections": most,
    }


def meter_parties(server: PlacementServer, serve: Serve | None = None) -> CpuMeter:
    """A started CPU meter of each party: Placement's workers and their PostgreSQL backends,
    this bench (the callers, or the floor's client, and the heartbeats), the daemon and its
    backends."""
    gunicorn = getattr(server, "_proc", None)

    def placement() -> list[int]:
        return tree(gunicorn.pid) if gunicorn else []

    parties: dict[str, Pids] = {
        "placement": placement,
        "placement_pg": lambda: pg_backends_of(placement()),
        "bench": me,
        "bench_pg": lambda: pg_backends_of(me()),  # the computes' heartbeat UPDATEs, mostly
    }
    if serve is not None:
        parties["daemon"] = lambda: [serve.proc.pid] if serve.proc else []
        parties["daemon_pg"] = lambda: pg_backends_of(parties["daemon"]())
    cpu = CpuMeter(parties)
    cpu.start()
    return cpu


def connection_budget(args: argparse.Namespace) -> int:
    """The most PostgreSQL connections one run opens: the daemon's pools (``db_pool_size``
    for the API database and each cell), its mirror and the guard's two one-connection
    pools; Placement's workers (one each: a sync worker serves one request at a time); this
    bench's pools (one a database in use: the heartbeat's cells, the API) and checks."""
    daemon = int(args.db_pool_size) * (int(args.cells) + 1) + 3
    return daemon + int(args.placement_workers) + int(args.cells) + 4


def run_mode(
    mode: str,
    conf_text: str,
    tmp: Path,
    amqp: str,
    args: argparse.Namespace,
    pdsn: str,
    server: PlacementServer,
    root: Path = ROOT,
) -> dict[str, Any]:
    conf = tmp / f"{mode}.conf"
    health = tmp / f"{mode}.health.json"
    conf.write_text(conf_text + f"health_file = {health}\n")
    serve = Serve(conf, tmp / f"{mode}.log", health, root)
    callers = Callers(amqp, args.projects)
    out: dict[str, Any] = {"mode": mode}
    try:
        progress(f"{mode}: starting the daemon (READY within {args.ready_timeout:.0f} s)")
        out["ready_s"] = serve.start(args.ready_timeout)
        out["rss_ready_mb"] = serve.rss_mb()
        out["connections_ready"] = connections(serve, server)
        out["loop_ready"] = serve.health().get("components", {}).get("looplag")
        progress(
            f"{mode}: READY in {out['ready_s']:.1f} s, RSS {out['rss_ready_mb']:.0f} MiB, "
            f"PostgreSQL connections {json.dumps(out['connections_ready'])}"
        )
        single_n = args.single if mode.startswith("mirror") else args.get_single
        callers.boot(1)  # warm: connections, first query
        # the daemon's CPU with no boots: refreshes and the computes' heartbeats; and what
        # every party and the whole machine take then (the cloud's fixed cost)
        idle = meter_parties(server, serve)
        busy0 = machine_busy_s()
        c0, w0 = serve.cpu_s(), time.monotonic()
        time.sleep(args.idle)
        span = time.monotonic() - w0
        out["idle_cpu_ms_per_s"] = (serve.cpu_s() - c0) / span * 1000
        out["idle_ms_per_s"] = {k: round(v / span * 1000, 1) for k, v in idle.stop().items()}
        out["idle_ms_per_s"]["machine"] = round((machine_busy_s() - busy0) / span * 1000, 1)
        phases = phase_sums(args.admin_port)
        lat = [callers.boot(1)[0] for _ in range(single_n)]
        out["single_phase_ms"] = phase_means_ms(phases, phase_sums(args.admin_port))
        out["single_p50_ms"] = p50(lat) * 1000
        out["single_p90_ms"] = pct(lat, 0.9) * 1000
        progress(f"{mode}: {single_n} single boots, p50 {out['single_p50_ms']:.0f} ms")
        with ThreadPoolExecutor(args.callers) as pool:
            # Each caller thread connects first (a conductor worker is connected already): a
            # ping per thread, held at a barrier so that every thread takes one.
            connected = threading.Barrier(args.callers)

            def connect(_: int) -> None:
                callers.client().ping("bench")
                connected.wait(120)

            list(pool.map(connect, range(args.callers)))
            reads0 = fresh_reads(serve)
            cpu = meter_parties(server, serve)
            t0, c0 = time.perf_counter(), serve.cpu_s()
            res = list(pool.map(lambda _: callers.boot(1), range(args.boots)))
            took = time.perf_counter() - t0
            out["concurrent_cpu_ms_per_boot"] = (serve.cpu_s() - c0) / args.boots * 1000
            out["cpu_ms_per_boot"] = {
                k: round(v * 1000 / args.boots, 2) for k, v in cpu.stop().items()
            }
            out["fresh_reads_per_boot"] = round((fresh_reads(serve) - reads0) / args.boots, 3)
        conc = [r[0] for r in res]
        out["concurrent_boots_s"] = args.boots / took
        out["concurrent_p50_ms"] = p50(conc) * 1000
        out["concurrent_p90_ms"] = pct(conc, 0.9) * 1000
        progress(
            f"{mode}: {args.boots} boots from {args.callers} callers, "
            f"{out['concurrent_boots_s']:.1f}/s"
        )
        took, (uuids, reply) = callers.boot(args.multi)
        sels = decode_reply(reply)
        out["multi_s"] = took
        out["multi_selected"] = len(sels)
        out["multi_claimed"] = asyncio.run(claimed(pdsn, uuids))
        time.sleep(2.5)  # one more host-state refresh writes the health file
        out["rss_end_mb"] = serve.rss_mb()
        out["connections_end"] = connections(serve, server)
        progress(
            f"{mode}: {args.multi}-instance boot in {took:.2f} s; RSS {out['rss_end_mb']:.0f} MiB"
        )
        h = serve.health().get("components", {})
        out["candidates"] = h.get("candidates")
        out["mirror"] = h.get("placement_mirror")
        out["claim_batches"] = (h.get("placement") or {}).get("claim_batches")
        hs = h.get("hoststate") or {}
        ages = [c.get("age") for c in (hs.get("cells") or {}).values() if c.get("age") is not None]
        out["host_state_age_max_s"] = max(ages) if ages else None
        out["host_state_refresh"] = refresh_means(args.admin_port)
        out["loop"] = h.get("looplag")  # the loop's worst lag and the collector's pauses
    finally:
        callers.close()
        serve.stop()
    return out


def fresh_reads(serve: Serve) -> int:
    """The per-request services reads the daemon made so far (its health file, written at
    every host-state refresh: read after one more refresh, with no request in between)."""
    time.sleep(2.2)  # refresh_interval 2 s
    hs = serve.health().get("components", {}).get("hoststate") or {}
    return int(hs.get("services_fresh_reads") or 0)


async def heartbeat(db: NovaDB, every: float = 10.0, slices: int = 10) -> None:
    """Keep every seeded compute service up (service_down_time is 60 s), each reporting once
    per ``every`` seconds as nova-compute's report_interval does: a tenth of them each
    ``every / slices`` seconds, not all 10,000 rows at one instant."""
    tick = 0
    while True:
        now = datetime.now(UTC).replace(tzinfo=None)
        for cell in db.cells:
            await db.cell_execute(
                cell,
                "UPDATE services SET updated_at = $1, last_seen_up = $1 WHERE id % $2 = $3",
                now,
                slices,
                tick % slices,
            )
        tick += 1
        await asyncio.sleep(every / slices)


async def claim_rate(
    server: PlacementServer,
    hosts: list[SeededProvider],
    n: int,
    conc: int,
    *,
    batch: int = 1,
    in_flight: int = 4,
    projects: int = 1,
) -> tuple[float, float]:
    """Placement alone: ``n`` one-instance claims at ``conc`` in flight, as the daemon's
    client sends them (guard off): each its own PUT /allocations, or with ``batch`` > 1 the
    waiting ones sharing POSTs, claim i for tenant i mod ``projects`` (0: a new tenant each).
    (claims/s, p50 latency of one claim in ms)."""
    lat: list[float] = []
    tenants = [(uuidlib.uuid4().hex, uuidlib.uuid4().hex) for _ in range(projects)]
    # the daemon's timeout (daemon_texts: 600 s), not the test default of 10 s: a shared POST
    # of 32 claims can take longer than 10 s on a loaded machine
    options = dataclasses.replace(server.options, timeout=600.0)
    async with PlacementClient(
        options, claim_batch_size=batch, claim_writes_in_flight=in_flight
    ) as client:
        sem = asyncio.Semaphore(conc)

        async def one(i: int) -> bool:
            rp = hosts[(i * 7919) % len(hosts)].uuid
            ar = {"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}}
            project, user = (
                tenants[i % projects] if projects else (uuidlib.uuid4().hex, uuidlib.uuid4().hex)
            )
            async with sem:
                t = time.perf_counter()
                ok = await client.claim(str(uuidlib.uuid4()), ar, project_id=project, user_id=user)
                lat.append(time.perf_counter() - t)
                return ok

        t0 = time.perf_counter()
        ok = await asyncio.gather(*(one(i) for i in range(n)))
        took = time.perf_counter() - t0
    if not all(ok):  # counted, not fatal: the run's other figures stand
        print(f"  floor: {ok.count(False)} of {n} claims refused at concurrency {conc}", flush=True)
    return ok.count(True) / took, p50(lat) * 1000


async def prepare_cloud(
    server: PlacementServer,
    db: NovaDB,
    hosts: list[SeededProvider],
    pdsn: str,
    *,
    cells: int = 1,
    instances_per_host: int = 0,
    vacuum: bool = False,
) -> None:
    """The providers COPYed into Placement's database (read back through its API), the same
    hosts spread over ``cells`` nova cell databases, and ``instances_per_host`` instances a
    host with their allocations in Placement (read back through its API); with ``vacuum``,
    every seeded database vacuumed and analyzed after (``pg_upkeep``)."""
    async with server.seeder() as s:
        await s.call("GET", "/traits")  # Placement syncs its standard traits
        t0 = time.perf_counter()
        await seed(pdsn, hosts)
        took = time.perf_counter() - t0
        checked = await verify_readback(s, hosts, 200)
        _, rps = await s.call("GET", "/resource_providers?resources=VCPU:1")
        assert len(rps["resource_providers"]) == len(hosts)
    print(
        f"seeded {len(hosts)} providers into Placement's database in {took:.1f} s; "
        f"Placement's API lists all {len(hosts)} and reads {checked} sampled ones back "
        "unchanged",
        flush=True,
    )
    await db.create(n_cells=cells)
    k = instances_per_host
    consumers: list[tuple[str, str]] = []
    t0 = time.perf_counter()
    for ci, cell in enumerate(db.cells):
        mine = hosts[ci :: len(db.cells)]
        await copy_hosts(
            db,
            cell,
            [
                NodeSpec(
                    host=h.name,
                    uuid=h.uuid,
                    vcpus=h.vcpus,
                    vcpus_used=k * INSTANCE["VCPU"],
                    memory_mb=h.memory_mb,
                    memory_mb_used=512 + k * INSTANCE["MEMORY_MB"],
                    local_gb=h.disk_gb,
                    local_gb_used=k * INSTANCE["DISK_GB"],
                    running_vms=k,
                )
                for h in mine
            ],
        )
        if k:
            by_name = {h.name: h.uuid for h in mine}
            made = await copy_instances(cell, [h.name for h in mine], k)
            consumers += [(u, by_name[host]) for u, host in made]
        progress(f"cell {ci + 1}/{len(db.cells)}: {len(mine)} hosts, {len(mine) * k} instances")
    print(
        f"seeded {len(hosts)} hosts and {len(consumers)} instances ({k} a host) in "
        f"{len(db.cells)} cells in {time.perf_counter() - t0:.1f} s",
        flush=True,
    )
    if consumers:
        t0 = time.perf_counter()
        n_rows = await seed_allocations(pdsn, consumers)
        async with server.seeder() as s:
            checked = await verify_allocations(s, consumers)
        print(
            f"seeded {n_rows} allocation rows in Placement in {time.perf_counter() - t0:.1f} s; "
            f"Placement's API reads {checked} sampled consumers and their providers' "
            "usages back as written",
            flush=True,
        )
    if vacuum:
        t0 = time.perf_counter()
        await vacuum_seeded([pdsn, db.api_dsn] + [c.dsn for c in db.cells])
        print(
            f"VACUUM ANALYZE of Placement's and nova's databases after the seed (autovacuum's "
            f"work after a bulk load) in {time.perf_counter() - t0:.1f} s",
            flush=True,
        )


def progress(what: str) -> None:
    """A timestamped progress line with the load average (a long run shows where it is)."""
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"[{datetime.now(UTC):%H:%M:%S} load {load}] {what}", flush=True)


def daemon_texts(
    server: PlacementServer, db: NovaDB, amqp: str, pdsn: str, *, admin_port: int | None = None
) -> tuple[str, str]:
    """The daemon's configuration file: (mirror off, mirror on), ``[asyncsched]`` last."""
    config = daemon_config(
        transport_url=amqp,
        api_url=db.api_url,
        placement=server.options,
        scheduler_host=f"bench-{uuidlib.uuid4().hex[:6]}",
        refresh_interval=2.0,  # the health file is written on each host-state refresh
        full_resync_interval=3600.0,
        service_down_time=60,  # nova's default: the computes beat (``heartbeat``) as in a cloud
        drain_timeout=30.0,
    )
    base = config_file_text(config)
    if admin_port is not None:
        base += f"admin_listen = 127.0.0.1:{admin_port}\n"
    base = base.replace(f"timeout = {server.options.timeout}", "timeout = 600")
    with_mirror = (
        base
        + "placement_mirror_interval = 0.5\n"
        + f"[placement_database]\nconnection = {pdsn}\n[asyncsched]\n"
    )
    return base, with_mirror


async def e2e(args: argparse.Namespace) -> None:
    with broker.throwaway_vhost("asyncsched-bench") as vhost, production_upkeep(args.autovacuum):
        await e2e_in(args, broker.amqp_url(vhost))


async def e2e_in(args: argparse.Namespace, amqp: str) -> None:
    db = NovaDB(prefix="asyncsched_bcand")
    server = PlacementServer(workers=args.placement_workers)
    tmp = Path(tempfile.mkdtemp(prefix="bench-cand-"))
    used, most = pg_in_use()
    need = connection_budget(args)
    progress(
        f"PostgreSQL serves {used} of {most} connections; this run opens at most {need} "
        f"(daemon {args.db_pool_size} a database x {args.cells + 1} + 3, Placement "
        f"{args.placement_workers}, bench {args.cells + 4})"
    )
    progress(f"the daemon's boots take {len(FLAVORS)} flavor(s) in turn: {FLAVORS}")
    if used + need > most:
        raise SystemExit(f"not enough PostgreSQL connections free: {most - used} < {need}")
    try:
        await asyncio.to_thread(server.start)
        pdsn = f"postgresql://root@127.0.0.1/{server.db_name}"
        hosts = plan(args.providers)

        await prepare_cloud(
            server,
            db,
            hosts,
            pdsn,
            cells=args.cells,
            instances_per_host=args.instances_per_host,
            vacuum=args.autovacuum,
        )
        base, with_mirror = daemon_texts(server, db, amqp, pdsn, admin_port=args.admin_port)
        given = {o.split("=", 1)[0].strip() for o in args.option}  # --option wins
        sized = "".join(
            f"{k} = {v}\n"
            for k, v in (
                ("db_pool_size", args.db_pool_size),
                ("db_query_timeout", args.db_query_timeout),
            )
            if k not in given
        )
        base, with_mirror = base + sized, with_mirror + sized
        # nova-compute's service reports, through the floor's claims too (their UPDATEs load
        # the same PostgreSQL in a real cloud, whichever scheduler runs)
        beat = asyncio.create_task(heartbeat(db, args.report_interval))
        try:
            results = []
            extra = "".join(f"{o.replace('=', ' = ', 1)}\n" for o in args.option)
            modes = [("mirror", with_mirror + extra)]
            if not args.mirror_only and not args.no_get:
                modes.append(("GET", base + "placement_mirror = false\n" + extra))
            if args.ab_tree:  # the other checkout's daemon first: same load, --ab-option
                ab = await asyncio.to_thread(
                    run_mode,
                    "mirror-A",
                    with_mirror + "".join(f"{o.replace('=', ' = ', 1)}\n" for o in args.ab_option),
                    tmp,
                    amqp,
                    args,
                    pdsn,
                    server,
                    Path(args.ab_tree),
                )
                print(f"  mirror-A: {json.dumps(ab, default=str)}", flush=True)
            for mode, text in modes:
                results.append(
                    await asyncio.to_thread(run_mode, mode, text, tmp, amqp, args, pdsn, server)
                )
                print(f"  {mode}: {json.dumps(results[-1], default=str)}", flush=True)
            if args.ab_tree:
                report_ab(ab, results[0], args)
            if args.ab_report_interval:
                # the same daemon again, the computes reporting less often: what the
                # heartbeats cost, in the same run
                beat.cancel()
                beat = asyncio.create_task(heartbeat(db, args.ab_report_interval))
                await asyncio.sleep(args.ab_report_interval)  # every compute reported once
                mode = f"mirror-beat{args.ab_report_interval:g}"
                results.append(
                    await asyncio.to_thread(
                        run_mode, mode, with_mirror + extra, tmp, amqp, args, pdsn, server
                    )
                )
                print(f"  {mode}: {json.dumps(results[-1], default=str)}", flush=True)
                beat.cancel()
                beat = asyncio.create_task(heartbeat(db, args.report_interval))
            if args.mirror_only:
                m = results[0]
                print(
                    f"mirror only {args.option}, {args.projects} projects: "
                    f"one boot p50 {m['single_p50_ms']:.0f} ms; "
                    f"{args.boots} boots from {args.callers} callers "
                    f"{m['concurrent_boots_s']:.1f}/s, p50 {m['concurrent_p50_ms']:.0f} ms, "
                    f"p90 {m['concurrent_p90_ms']:.0f} ms; "
                    f"daemon CPU {m['concurrent_cpu_ms_per_boot']:.1f} ms a boot, "
                    f"{m['idle_cpu_ms_per_s']:.0f} ms/s idle (heartbeats, refreshes); "
                    f"{args.multi}-instance multi-create {m['multi_s']:.2f} s; "
                    f"claim writes {json.dumps(m.get('claim_batches'))}"
                )
                return
            progress("Placement's claim floor: PUT at 1, 8 and the callers', shared POSTs")
            rates = {}
            for c in (1, 8, args.callers):
                cpu = meter_parties(server)
                rates[c] = await claim_rate(server, hosts, args.claims, c, projects=args.projects)
                if c == args.callers:
                    args.floor_cpu_ms = {
                        k: round(v * 1000 / args.claims, 2) for k, v in cpu.stop().items()
                    }
            shared = {
                c: await claim_rate(
                    server, hosts, args.claims, c, batch=32, in_flight=4, projects=args.projects
                )
                for c in (args.callers, 64)
            }
        finally:
            beat.cancel()
        if args.no_get:
            report_targets(results[0], rates, shared, args)
            if args.ab_report_interval:
                print(
                    f"\n== the same with the computes reporting every {args.ab_report_interval:g} s"
                )
                report_targets(results[-1], rates, shared, args)
        else:
            report_e2e(results, rates, shared, args)
    finally:
        await asyncio.to_thread(server.stop)
        await db.drop()


def report_targets(
    m: dict[str, Any],
    rates: dict[int, tuple[float, float]],
    shared: dict[int, tuple[float, float]],
    args: argparse.Namespace,
) -> None:
    """The mirror run against issue #24's targets, each beside Placement's floor measured in
    the same run."""
    one_rate, one_ms = rates[1]
    rate20, _ = rates[args.callers]
    shared_best = max(r for r, _ in shared.values())
    mh = m.get("mirror") or {}
    lag_max = (mh.get("interval_s") or 0) * 1000 + (mh.get("refresh_ms_max") or 0)
    multi_floor = args.multi / rate20
    rows = [
        ("READY (s)", f"{m['ready_s']:.1f}", "<= 60", m["ready_s"] <= 60),
        ("RSS after READY (MiB)", f"{m['rss_ready_mb']:.0f}", "<= 2048", m["rss_ready_mb"] <= 2048),
        ("RSS at the end (MiB)", f"{m['rss_end_mb']:.0f}", "<= 2048", m["rss_end_mb"] <= 2048),
        (
            "one boot p50 (ms)",
            f"{m['single_p50_ms']:.0f}",
            f"<= claim {one_ms:.0f} + 30",
            m["single_p50_ms"] <= one_ms + 30,
        ),
        (
            f"{args.boots} boots from {args.callers} callers (/s)",
            f"{m['concurrent_boots_s']:.1f}",
            f">= 0.8 x {rate20:.1f} ({m['concurrent_boots_s'] / rate20:.2f}x)",
            m["concurrent_boots_s"] >= 0.8 * rate20,
        ),
        (
            f"{args.multi}-instance boot (s)",
            f"{m['multi_s']:.2f}",
            f"<= 1.25 x {multi_floor:.2f} ({m['multi_s'] / multi_floor:.2f}x)",
            m["multi_s"] <= 1.25 * multi_floor,
        ),
        (
            "mirror lag bound: interval + max refresh (ms)",
            f"{lag_max:.0f}",
            "<= 1000",
            lag_max <= 1000,
        ),
    ]
    print(f"\n== issue #24 targets, {args.providers} hosts in {args.cells} cells (mirror on)")
    for label, got, target, ok in rows:
        print(f"  {label:46} {got:>10}  {target:32} {'met' if ok else 'NOT met'}")
    print(
        f"  Placement's claim floor, same run: PUT /allocations {one_rate:.1f}/s at concurrency 1 "
        f"(p50 {one_ms:.0f} ms), "
        + ", ".join(f"{r:.1f}/s at {c}" for c, (r, _) in rates.items())
        + f"; shared POSTs up to {shared_best:.1f}/s"
    )
    print(
        f"  mirror: {mh.get('providers')} providers loaded in {mh.get('load_ms')} ms; refresh "
        f"p50 {mh.get('refresh_ms_p50')} ms, max {mh.get('refresh_ms_max')} ms every "
        f"{mh.get('interval_s')} s ({mh.get('refreshes')} refreshes, "
        f"{mh.get('refresh_failures')} failed)"
    )
    print(
        f"  host state: passes {json.dumps(m.get('host_state_refresh'))}, "
        f"oldest cell read {m.get('host_state_age_max_s')} s ago at the end"
    )
    print(f"  claim writes: {json.dumps(m.get('claim_batches'))}")
    print(f"  one boot's phases, mean ms: {json.dumps(m.get('single_phase_ms'))}")
    loop, ready = m.get("loop") or {}, m.get("loop_ready") or {}
    print(
        f"  event loop: worst lag {loop.get('max_s')} s (by READY {ready.get('max_s')} s); "
        f"garbage collections by generation {loop.get('gc_collections')}, "
        f"{loop.get('gc_pause_s')} s in all, the longest {loop.get('gc_pause_max_s')} s "
        f"(by generation {loop.get('gc_pause_longest_s')} s; its CPU "
        f"{loop.get('gc_pause_max_cpu_s')} s, freeing {loop.get('gc_pause_max_collected')} "
        "unreachable objects) "
        f"(by READY: {ready.get('gc_collections')}, {ready.get('gc_pause_s')} s)"
    )
    print(
        f"  PostgreSQL connections after READY {json.dumps(m.get('connections_ready'))}, "
        f"at the end {json.dumps(m.get('connections_end'))}"
    )
    print(
        f"  CPU ms per boot, {args.boots} boots from {args.callers} callers: "
        f"{json.dumps(m.get('cpu_ms_per_boot'))}; per claim of the PUT floor at "
        f"{args.callers}: {json.dumps(getattr(args, 'floor_cpu_ms', None))}"
    )
    print(
        f"  CPU ms a second with no boots ({args.idle:g} s; the cloud's fixed cost): "
        f"{json.dumps(m.get('idle_ms_per_s'))}"
    )
    print(f"  load average at the end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


def report_ab(a: dict[str, Any], b: dict[str, Any], args: argparse.Namespace) -> None:
    """``--ab-tree``: the other checkout's daemon (A, run first) beside this one's (B)."""
    print(
        f"\n== A/B, {args.boots} boots from {args.callers} callers: "
        f"A = {args.ab_tree}, B = this tree"
    )
    for name, m in (("A", a), ("B", b)):
        cpu = m.get("cpu_ms_per_boot") or {}
        own = (cpu.get("daemon") or 0) + (cpu.get("daemon_pg") or 0)
        print(
            f"  {name}: {m['concurrent_boots_s']:.1f} boots/s, "
            f"p50 {m['concurrent_p50_ms']:.0f} ms; "
            f"one boot p50 {m['single_p50_ms']:.0f} ms; CPU ms per boot {json.dumps(cpu)} "
            f"(daemon + its PG {own:.2f}); services reads per boot "
            f"{m.get('fresh_reads_per_boot')}; idle daemon {m['idle_cpu_ms_per_s']:.0f} ms/s"
        )


def report_e2e(
    results: list[dict[str, Any]],
    rates: dict[int, tuple[float, float]],
    shared: dict[int, tuple[float, float]],
    args: argparse.Namespace,
) -> None:
    m, g = results[0], results[1]
    print(
        f"\n== end to end, {args.providers} providers, real oslo.messaging client, asyncsched serve"
    )
    rows = [
        ("one boot p50 (ms)", "single_p50_ms", "{:.0f}"),
        ("one boot p90 (ms)", "single_p90_ms", "{:.0f}"),
        (
            f"{args.boots} boots from {args.callers} callers (boots/s)",
            "concurrent_boots_s",
            "{:.1f}",
        ),
        ("   their p50 latency (ms)", "concurrent_p50_ms", "{:.0f}"),
        ("   their p90 latency (ms)", "concurrent_p90_ms", "{:.0f}"),
        (f"{args.multi}-instance multi-create (s)", "multi_s", "{:.2f}"),
        ("   instances claimed in Placement", "multi_claimed", "{}"),
    ]
    print(f"  {'':44} {'mirror':>10} {'GET':>10} {'ratio':>7}")
    for label, key, fmt in rows:
        a, b = m[key], g[key]
        ratio = (b / a if "boots_s" not in key else a / b) if a and b else float("nan")
        ratio_s = f"{ratio:.1f}x" if key not in ("multi_claimed",) else ""
        print(f"  {label:44} {fmt.format(a):>10} {fmt.format(b):>10} {ratio_s:>7}")
    print(
        "  Placement's own claims (PUT /allocations), the floor: "
        + ", ".join(
            f"{r:.0f}/s at concurrency {c} (p50 {ms:.0f} ms)" for c, (r, ms) in rates.items()
        )
    )
    print(
        "  Placement's own claims sharing POST /allocations (32 a POST, 4 writes in flight): "
        + ", ".join(
            f"{r:.0f}/s at concurrency {c} (p50 {ms:.0f} ms)" for c, (r, ms) in shared.items()
        )
    )
    print(
        f"  claim writes (mirror run): {json.dumps(m.get('claim_batches'))}; "
        f"(GET run): {json.dumps(g.get('claim_batches'))}"
    )
    print(f"  daemon READY after: mirror {m['ready_s']:.1f} s, GET {g['ready_s']:.1f} s")
    print(
        f"  paths (mirror run): {json.dumps((m.get('candidates') or {}).get('paths'))}; "
        f"GET calls {(m.get('candidates') or {}).get('get_calls')}"
    )
    mh = m.get("mirror") or {}
    print(
        f"  mirror: {mh.get('providers')} providers, loaded in {mh.get('load_ms')} ms; "
        f"refresh p50 {mh.get('refresh_ms_p50')} ms every {mh.get('interval_s')} s "
        f"(max {mh.get('refresh_ms_max')} ms), {mh.get('refreshes')} refreshes, "
        f"{mh.get('on_demand_refreshes')} after refused claims"
    )


# ---- growth ---------------------------------------------------------------------------------


def request() -> ResourceRequest:
    g = RequestGroup(
        use_same_provider=False,
        resources={
            "VCPU": FLAVOR["vcpus"],
            "MEMORY_MB": FLAVOR["memory_mb"],
            "DISK_GB": FLAVOR["root_gb"],
        },
        required_traits=frozenset(TRAITS),
        forbidden_traits=frozenset({"COMPUTE_STATUS_DISABLED"}),
    )
    return ResourceRequest(groups=(g,), limit=1000)


async def growth_one(n: int, per_host: int = 0) -> dict[str, Any]:
    server = PlacementServer(workers=2)
    await asyncio.to_thread(server.start)
    try:
        dsn = f"postgresql://root@127.0.0.1/{server.db_name}"
        hosts = plan(n, prefix=f"g{n}")
        async with server.seeder() as s:
            await s.call("GET", "/traits")
            await seed(dsn, hosts)
            await verify_readback(s, hosts, 100)
            consumers = [(str(uuidlib.uuid4()), h.uuid) for h in hosts for _ in range(per_host)]
            rows = await seed_allocations(dsn, consumers) if consumers else 0
            if consumers:
                await verify_allocations(s, consumers, 50)
        out: dict[str, Any] = {"providers": n, "allocation_rows": rows}
        gc.collect()
        tracemalloc.start()
        m = PlacementMirror(dsn, interval=3600, max_age=1e9, query_timeout=300)
        await m.start()
        out["memory_mb"] = tracemalloc.get_traced_memory()[0] / 1e6
        tracemalloc.stop()
        await m.close()
        m = PlacementMirror(dsn, interval=3600, max_age=1e9, query_timeout=300)
        t0 = time.perf_counter()
        await m.start()
        out["load_s"] = time.perf_counter() - t0
        idle, idle_cpu = [], []
        for _ in range(10):
            t0, c0 = time.perf_counter(), time.process_time()
            await m.refresh()
            idle.append(time.perf_counter() - t0)
            idle_cpu.append(time.process_time() - c0)
        out["refresh_idle_ms"] = p50(idle) * 1000
        out["refresh_idle_cpu_ms"] = p50(idle_cpu) * 1000
        await m.close()
        # lag and refresh cost while claims land, with the background refresh every 0.5 s
        m = PlacementMirror(dsn, interval=0.5, max_age=1e9, query_timeout=300)
        await m.start()
        lags: list[float] = []
        async with server.seeder() as s:
            for i in range(10):
                rp = hosts[(i * 104729) % n]
                consumer = str(uuidlib.uuid4())
                body = {
                    "allocations": {rp.uuid: {"resources": {"VCPU": 1}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                }
                st = m.state
                assert st is not None
                had = st.providers[st.by_uuid[rp.uuid]].used.get("VCPU", 0)
                status, _ = await s.call("PUT", f"/allocations/{consumer}", body)
                assert status == 204
                done = time.perf_counter()
                while True:
                    st = m.state
                    assert st is not None
                    if st.providers[st.by_uuid[rp.uuid]].used.get("VCPU", 0) > had:
                        break
                    await asyncio.sleep(0.01)
                lags.append(time.perf_counter() - done)
                await asyncio.sleep(0.13 * (i % 4))
        h = m.health()
        out["lag_p50_ms"] = p50(lags) * 1000
        out["lag_max_ms"] = max(lags) * 1000
        out["refresh_busy_ms"] = h["refresh_ms_p50"]
        state, _ = m.serving()
        assert state is not None
        gc.freeze()
        lc, req = LocalCandidates(), request()
        lc.compute(state, req)
        times, cpu = [], []
        for _ in range(20):
            t0, c0 = time.perf_counter(), time.process_time()
            c = lc.compute(state, req)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        gc.unfreeze()
        out["local_ms"] = p50(times) * 1000
        out["local_cpu_ms"] = p50(cpu) * 1000
        out["local_candidates"] = len(getattr(c, "allocation_requests", []))
        await m.close()
        slow = dataclasses.replace(server.options, timeout=900.0)
        async with PlacementClient(slow) as client:
            t0 = time.perf_counter()
            try:
                got = await client.get_allocation_candidates(req)
                out["get_ms"] = (time.perf_counter() - t0) * 1000
                out["get_candidates"] = len(got.allocation_requests)
            except PlacementError as exc:
                print(f"  GET at {n}: {exc}")
                out["get_ms"] = float("nan")
        return out
    finally:
        await asyncio.to_thread(server.stop)


def growth(sizes: list[int], per_host: int = 0) -> None:
    rows = []
    for n in sizes:
        rows.append(asyncio.run(growth_one(n, per_host)))
        print(f"  growth: {json.dumps(rows[-1])}", flush=True)
    print("\n== how the mirror grows (real Placement DB, COPY-seeded, read back through its API)")
    print(
        f"  {'providers':>9} {'load s':>7} {'memory MB':>9} {'refresh idle ms':>15} "
        f"{'refresh busy ms':>15} {'lag p50/max ms':>15} {'local cands ms':>14} "
        f"{'GET ms (limit 1000)':>19}"
    )
    for r in rows:
        print(
            f"  {r['providers']:>9} {r['load_s']:>7.2f} {r['memory_mb']:>9.1f} "
            f"{r['refresh_idle_ms']:>15.1f} "
            f"{r['refresh_busy_ms']:>15.1f} {r['lag_p50_ms']:>7.0f}/{r['lag_max_ms']:<7.0f} "
            f"{r['local_ms']:>14.1f} {r['get_ms']:>19.0f}"
        )
    print(
        "  (local cands: all matching hosts, no limit; refresh every 0.5 s: refresh ms / 500 is the"
        " share of one PostgreSQL backend it keeps busy)"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--providers", type=int, default=10000)
    ap.add_argument("--single", type=int, default=30, help="sequential one-instance boots (mirror)")
    ap.add_argument("--get-single", type=int, default=8, help="sequential boots on the GET path")
    ap.add_argument("--boots", type=int, default=100)
    ap.add_argument("--callers", type=int, default=20)
    ap.add_argument(
        "--projects",
        type=int,
        default=20,
        help="tenants the callers boot for (caller k: tenant k mod N); 0: a new one per boot",
    )
    ap.add_argument("--multi", type=int, default=1000)
    ap.add_argument(
        "--flavors",
        type=int,
        default=1,
        help="the daemon's boots take this many flavors in turn (FLAVOR and smaller ones); "
        "Placement's floor claims FLAVOR",
    )
    ap.add_argument(
        "--idle", type=float, default=20.0, help="seconds of daemon CPU measured with no boots"
    )
    ap.add_argument("--claims", type=int, default=300)
    ap.add_argument("--growth", default="1000,10000,100000", help="sizes, or '' to skip")
    ap.add_argument("--cells", type=int, default=1, help="nova cells the hosts are spread over")
    ap.add_argument(
        "--instances-per-host",
        type=int,
        default=0,
        help="instances seeded on every host, in nova's cells and as Placement allocations",
    )
    ap.add_argument(
        "--no-get",
        action="store_true",
        help="the mirror run and Placement's floor, reported against issue #24's targets "
        "(no GET run: at 100,000 hosts each GET takes tens of seconds)",
    )
    ap.add_argument("--admin-port", type=int, default=0, help="the daemon's admin endpoint")
    ap.add_argument(
        "--db-pool-size",
        type=int,
        default=2,
        help="the daemon's db_pool_size (connections per nova database: the API and each cell)",
    )
    ap.add_argument(
        "--db-query-timeout",
        type=float,
        default=180.0,
        help="the daemon's db_query_timeout: the first host-state load of a big cell is one "
        "long read on a loaded machine",
    )
    ap.add_argument(
        "--ready-timeout", type=float, default=1200.0, help="seconds the daemon has to be READY"
    )
    ap.add_argument(
        "--report-interval",
        type=float,
        default=10.0,
        help="seconds between one compute's service reports (nova's report_interval: 10)",
    )
    ap.add_argument(
        "--ab-report-interval",
        type=float,
        default=0.0,
        help="then a second daemon with the computes reporting this often (an A/B of the "
        "heartbeats' cost in the same run; below nova's service_down_time of 60 s)",
    )
    ap.add_argument(
        "--ab-tree",
        default="",
        metavar="PATH",
        help="first a daemon run from this other checkout (e.g. a git worktree of main), the "
        "same config and load: A/B of the daemon's CPU per boot in one run",
    )
    ap.add_argument(
        "--ab-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [asyncsched] option for the --ab-tree daemon (A) instead of the --option ones "
        "(repeatable): --ab-tree . --ab-option X=0 --option X=1 is an A/B of one option",
    )
    ap.add_argument("--placement-workers", type=int, default=2, help="Placement's gunicorn workers")
    ap.add_argument("--skip-e2e", action="store_true")
    ap.add_argument(
        "--no-autovacuum",
        dest="autovacuum",
        action="store_false",
        help="leave the cluster's autovacuum as it is (off on the test machines) and the seeded "
        "tables unvacuumed; by default the run has PostgreSQL's default, autovacuum on, and "
        "vacuums the seed (bench/pg_upkeep.py)",
    )
    ap.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an [asyncsched] option for the daemon in both modes (repeatable)",
    )
    ap.add_argument(
        "--mirror-only",
        action="store_true",
        help="the mirror path alone: no GET path, no Placement floor (quick comparisons)",
    )
    args = ap.parse_args(argv)
    if not 1 <= args.flavors <= 7:
        ap.error("--flavors: 1 to 7")
    FLAVORS[:] = flavor_mix(args.flavors)
    if not args.admin_port:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            args.admin_port = sock.getsockname()[1]
    if not args.skip_e2e:
        asyncio.run(e2e(args))
    if args.growth:
        growth([int(x) for x in args.growth.split(",")], args.instances_per_host)
    return 0


if __name__ == "__main__":
    sys.exit(main())
