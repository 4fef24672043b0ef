"""The fault tests' stack and bookkeeping: a seeded cloud, daemons, many real callers, audits.

Shared by ``tests/integration/chaos``, ``tests/integration/fuzz`` and ``bench/soak.py``.
``ChaosStack`` owns what a run needs and removes it afterwards: nova databases (PostgreSQL),
its own Placement seeded to match, a temp dir for daemon configs and logs. Callers are the
real oslo.messaging client; each call runs on its own thread so hundreds can be in flight.
``audit`` asks Placement itself what is allocated where: a provider over capacity or a
consumer whose allocations are not what its one answer said is a lost or doubled claim.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import uuid as uuidlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from asyncsched.conf.options import PlacementOptions
from asyncsched.objects.models import Selection
from tests.support import cloud as seeding
from tests.support.cloud import AggregatePlan, Cloud, HostPlan
from tests.support.nova_db import NovaDB
from tests.support.oslo_caller import OsloSchedulerClient, request_spec_primitive
from tests.support.placement_server import PlacementServer
from tests.support.serve_process import ServeProcess

# Fault-test sizes: the CI size keeps tests/integration/chaos to a few minutes on a loaded 2-core
# machine; ``make chaos`` sets ASYNCSCHED_CHAOS_BIG=1 for the sizes of issue #13 (200 calls in
# flight, bigger clouds). Every test prints its figures on lines starting ``FIGURE``.
BIG = os.environ.get("ASYNCSCHED_CHAOS_BIG", "") not in ("", "0")


def size(ci: int, big: int) -> int:
    """The CI size, or the big one under ``make chaos``."""
    return big if BIG else ci


def figure(name: str, text: str) -> None:
    """A figure line (``pytest -s`` shows them)."""
    print(f"FIGURE {name}{' (big)' if BIG else ''}: {text}", flush=True)


#: The flavor every chaos boot asks for (a 2 GiB, 1 vCPU, 20 GB instance).
FLAVOR = {"VCPU": 1, "MEMORY_MB": 2048, "DISK_GB": 20}


def tight_hosts(n_hosts: int, per_host: int, az: str = "az1") -> list[HostPlan]:
    """Hosts that each take exactly ``per_host`` FLAVOR instances (memory is the limit)."""
    memory = 512 + per_host * FLAVOR["MEMORY_MB"] + 1024  # reserved + room for 1/2 more
    return [
        HostPlan(f"t{i:03d}", i % 2, vcpus=64, memory_mb=memory, disk_gb=4000, aggregates=(az,))
        for i in range(n_hosts)
    ]


def roomy_hosts(n_hosts: int, az: str = "az1") -> list[HostPlan]:
    """Hosts with room for hundreds of FLAVOR instances each."""
    return [
        HostPlan(f"r{i:03d}", i % 2, vcpus=256, memory_mb=1048576, disk_gb=40000, aggregates=(az,))
        for i in range(n_hosts)
    ]


def boot_spec(n: int, az: str = "az1") -> dict[str, Any]:
    """A FLAVOR boot of ``n`` instances in ``az`` (no server group), as the conductor sends."""
    return request_spec_primitive(
        num_instances=n,
        memory_mb=FLAVOR["MEMORY_MB"],
        vcpus=FLAVOR["VCPU"],
        root_gb=FLAVOR["DISK_GB"],
        group_policy=None,
        availability_zone=az,
    )


# --- callers ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one select_destinations call got back: ``kind`` ok / novalidhost / timeout / error."""

    uuids: tuple[str, ...]
    kind: str
    seconds: float
    hosts: tuple[str, ...] = ()  # compute node uuid claimed per instance (ok only)
    detail: str = ""
    started: float = 0.0  # time.monotonic() when the call was made


def classify(exc: BaseException) -> tuple[str, str]:
    name = type(exc).__name__
    exc_type = getattr(exc, "exc_type", "")
    if name == "NoValidHost" or exc_type == "NoValidHost":
        return "novalidhost", ""
    if name == "MessagingTimeout":
        return "timeout", str(exc)[:200]
    return "error", f"{name}: {str(exc)[:300]}"


def boot(client: OsloSchedulerClient, n: int, az: str = "az1", **call: Any) -> Outcome:
    """One select_destinations call for ``n`` new instances; never raises."""
    uuids = tuple(str(uuidlib.uuid4()) for _ in range(n))
    t0 = time.monotonic()
    try:
        reply = client.select_destinations(boot_spec(n, az), list(uuids), **call)
    except Exception as exc:  # every failure is an outcome to count, not a test crash
        kind, detail = classify(exc)
        return Outcome(uuids, kind, time.monotonic() - t0, detail=detail, started=t0)
    sels: list[list[Selection]] = seeding.decode_reply(reply)
    hosts = tuple(str(s[0].compute_node_uuid) for s in sels)
    return Outcome(uuids, "ok", time.monotonic() - t0, hosts=hosts, started=t0)


async def first_answers(futures: list[Future[Outcome]], count: int) -> None:
    """Return once ``count`` of ``futures`` are done (or 30 s passed)."""
    pending = {asyncio.wrap_future(f) for f in futures}
    done_count = 0
    deadline = time.monotonic() + 30
    while pending and done_count < count and time.monotonic() < deadline:
        done, pending = await asyncio.wait(
            pending, timeout=deadline - time.monotonic(), return_when=asyncio.FIRST_COMPLETED
        )
        done_count += len(done)


def run_calls(jobs: Sequence[Callable[[], Outcome]], threads: int | None = None) -> list[Outcome]:
    """Run every job on its own thread (all in flight at once by default); outcomes in order."""
    with ThreadPoolExecutor(max_workers=threads or max(1, len(jobs))) as pool:
        return list(pool.map(lambda job: job(), jobs))


class Load:
    """``threads`` callers booting ``per_call`` instances back to back until stopped."""

    def __init__(self, client: OsloSchedulerClient, threads: int = 4, per_call: int = 1) -> None:
        self._client = client
        self._per_call = per_call
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _ in range(threads)]
        self._lock = threading.Condition()
        self.outcomes: list[Outcome] = []

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(300)

    def _run(self) -> None:
        while not self._stop.is_set():
            outcome = boot(self._client, self._per_call)
            with self._lock:
                self.outcomes.append(outcome)
                self._lock.notify_all()

    def wait_ok(self, since: float, timeout: float) -> float | None:
        """Block until a call made at or after ``since`` succeeded: when it ended, or None."""

        def first() -> float | None:
            ends = [
                o.started + o.seconds
                for o in self.outcomes
                if o.started >= since and o.kind == "ok"
            ]
            return min(ends, default=None)

        with self._lock:
            self._lock.wait_for(lambda: first() is not None, timeout)
            return first()

    def since(self, t: float) -> list[Outcome]:
        with self._lock:
            return [o for o in self.outcomes if o.started >= t]


def kinds(outcomes: Iterable[Outcome]) -> dict[str, int]:
    return dict(Counter(o.kind for o in outcomes))


def percentiles(values: Sequence[float], points: Sequence[int] = (50, 95, 99)) -> dict[int, float]:
    """Nearest-rank percentiles (empty input: zeros)."""
    if not values:
        return dict.fromkeys(points, 0.0)
    ordered = sorted(values)
    last = len(ordered) - 1
    return {p: ordered[min(last, max(0, round(p / 100 * len(ordered)) - 1))] for p in points}


# --- a daemon's loop, seen from outside -------------------------------------------------------


class HealthBeat:
    """The daemon's own heartbeat: it rewrites its health file every ``interval`` seconds
    (the snapshot taken on its event loop, the file written by a thread), so a gap between two
    writes longer than ``interval`` is time the loop could not run *or* the write waited for
    the disk. A thread watches the file's mtime every 10 ms; ``worst_lag`` is the longest gap
    minus the interval (configure ``refresh_interval`` = ``interval`` on the daemon).
    ``loop_lag_max`` is the loop alone: the daemon's ``looplag`` component, read from the file.

    With the daemon's ``pid``, the CPU it used during each gap is kept too: a long gap with
    about as much CPU is the loop busy in our code (a stall); one with little CPU is the
    process kept off the CPU (a starved machine) or blocked outside the loop."""

    def __init__(self, path: Path, interval: float, pid: int | None = None) -> None:
        self._path = path
        self._pid = pid
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.gaps: list[float] = []
        self.gap_cpu: list[float | None] = []  # daemon CPU seconds during each gap
        self.gap_end: list[float] = []  # wall clock (time.time()) at each gap's end

    def __enter__(self) -> HealthBeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _cpu(self) -> float | None:
        if self._pid is None:
            return None
        try:
            fields = Path(f"/proc/{self._pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _run(self) -> None:
        last: int | None = None
        last_cpu: float | None = None
        while not self._stop.wait(0.01):
            try:
                mtime = self._path.stat().st_mtime_ns
            except FileNotFoundError:
                continue
            if mtime == last:
                continue
            cpu = self._cpu()
            if last is not None:
                self.gaps.append((mtime - last) / 1e9)
                self.gap_cpu.append(None if cpu is None or last_cpu is None else cpu - last_cpu)
                self.gap_end.append(mtime / 1e9)
            last, last_cpu = mtime, cpu

    @property
    def lags(self) -> list[float]:
        return [max(0.0, g - self.interval) for g in self.gaps]

    @property
    def worst_lag(self) -> float:
        return max(self.lags, default=0.0)

    def loop_lag_max(self) -> float | None:
        """The longest the daemon's loop was held since it started (seconds), as its own
        ``looplag`` component measured it: a timer's lateness, whatever the disk does."""
        try:
            health = json.loads(self._path.read_text())
            return float(health["components"]["looplag"]["max_s"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def worst(self) -> str:
        """When the worst gap ended and how much CPU the daemon used in it."""
        if not self.gaps:
            return "no gap"
        i = max(range(len(self.gaps)), key=self.gaps.__getitem__)
        at = time.strftime("%H:%M:%S", time.localtime(self.gap_end[i]))
        cpu = self.gap_cpu[i]
        used = "" if cpu is None else f", daemon CPU {cpu * 1000:.0f} ms of it"
        return f"worst gap {self.gaps[i] * 1000:.0f} ms ending {at}{used}"

    def summary(self) -> str:
        p = percentiles(self.lags)
        own = self.loop_lag_max()
        return (
            f"{len(self.gaps)} health writes every {self.interval:g} s; their lag p50 "
            f"{p[50] * 1000:.0f} ms, p99 {p[99] * 1000:.0f} ms, max {self.worst_lag * 1000:.0f} ms"
            f" ({self.worst()}); the daemon's own loop lag max "
            + ("unknown" if own is None else f"{own * 1000:.0f} ms")
        )


# --- what Placement holds ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Audit:
    """Placement's view after a run."""

    #: consumer uuid -> provider uuids it holds allocations on
    consumers: Mapping[str, frozenset[str]]
    #: provider uuid -> {resource class: (used, capacity)} where used > capacity
    over_capacity: Mapping[str, Mapping[str, tuple[int, int]]]
    #: consumers holding more than one FLAVOR on a provider
    doubled: frozenset[str]

    def check(self, outcomes: Iterable[Outcome], before: Audit | None = None) -> list[str]:
        """Problems: over capacity, doubled claims, an ok instance whose allocation is not on
        its one selected host, an allocation no ok answer accounts for (leaked). Consumers
        ``before`` already held (an earlier test on the same cloud) are left out."""
        problems = [f"over capacity: {rp} {rcs}" for rp, rcs in self.over_capacity.items()]
        old = before.consumers if before is not None else {}
        problems += [f"doubled claim: {c}" for c in sorted(self.doubled) if c not in old]
        answered: dict[str, str] = {}
        for o in outcomes:
            if o.kind == "ok":
                answered.update(zip(o.uuids, o.hosts, strict=True))
        for inst, host in answered.items():
            held = self.consumers.get(inst, frozenset())
            if held != {host}:
                problems.append(f"instance {inst}: answered {host}, Placement holds {set(held)}")
        for inst in sorted(set(self.consumers) - set(answered) - set(old)):
            problems.append(f"leaked: {inst} holds {set(self.consumers[inst])}, no ok answer")
        return problems


async def audit(placement: PlacementServer, cloud: Cloud) -> Audit:
    """Every allocation on every seeded provider, and each provider's usage against capacity."""
    consumers: dict[str, set[str]] = {}
    over: dict[str, dict[str, tuple[int, int]]] = {}
    doubled: set[str] = set()
    async with placement.seeder() as s:

        async def one(rp: str) -> None:
            _, allocs = await s.call("GET", f"/resource_providers/{rp}/allocations")
            _, inv = await s.call("GET", f"/resource_providers/{rp}/inventories")
            used: Counter[str] = Counter()
            for consumer, data in allocs["allocations"].items():
                consumers.setdefault(consumer, set()).add(rp)
                res = data["resources"]
                used.update(res)
                if res.get("MEMORY_MB", 0) > FLAVOR["MEMORY_MB"]:
                    doubled.add(consumer)
            for rc, amount in used.items():
                i = inv["inventories"].get(rc)
                if i is None:
                    continue
                cap = int((i["total"] - i["reserved"]) * i["allocation_ratio"])
                if amount > cap:
                    over.setdefault(rp, {})[rc] = (amount, cap)

        await asyncio.gather(*(one(h.uuid) for h in cloud.hosts.values()))
    doubled |= {c for c, rps in consumers.items() if len(rps) > 1}
    return Audit({c: frozenset(r) for c, r in consumers.items()}, over, frozenset(doubled))


# --- the stack --------------------------------------------------------------------------------


@dataclass
class ChaosStack:
    """nova databases + a Placement of its own + a seeded cloud + daemons started on demand."""

    hosts: Sequence[HostPlan]
    az: str = "az1"
    placement_workers: int = 2
    db: NovaDB = field(init=False)
    placement: PlacementServer = field(init=False)
    cloud: Cloud = field(init=False)
    tmp: Path = field(init=False)
    daemons: list[ServeProcess] = field(default_factory=list)

    async def __aenter__(self) -> Self:
        self.tmp = Path(tempfile.mkdtemp(prefix="asyncsched-chaos-"))
        self.db = self._new_db()
        self.placement = PlacementServer(workers=self.placement_workers)
        try:
            await asyncio.to_thread(self.placement.start)
            await self.db.create(n_cells=2)
            async with self.placement.seeder() as seeder:
                self.cloud = await seeding.seed_cloud(
                    self.db, seeder, self.hosts, [AggregatePlan(self.az, availability_zone=self.az)]
                )
            await self._seeded()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    def _new_db(self) -> NovaDB:
        """The nova databases (made, then dropped with the stack); ``self.tmp`` exists."""
        return NovaDB(prefix="asyncsched_chaos")

    async def _seeded(self) -> None:
        """Called once the cloud is seeded, before the stack is handed out."""

    async def __aexit__(self, *exc: object) -> None:
        for d in self.daemons:
            d.stop()
        try:
            await self.db.drop()
        finally:
            await asyncio.to_thread(self.placement.stop)
            shutil.rmtree(self.tmp, ignore_errors=True)

    def daemon(
        self,
        transport_url: str,
        *,
        placement_url: str | None = None,
        rabbit: Mapping[str, Any] | None = None,
        extra: Mapping[str, Any] | None = None,
        ready: bool = True,
        **asyncsched: Any,
    ) -> ServeProcess:
        """Start one ``asyncsched serve`` for this cloud on ``transport_url``.

        ``rabbit``: extra ``[oslo_messaging_rabbit]`` options (queue durability);
        ``extra``: ``[asyncsched]`` options the config builder does not know (branch-specific);
        ``asyncsched``: AsyncschedOptions fields.
        """
        name = f"chaos-{uuidlib.uuid4().hex[:8]}"
        work = self.tmp / name
        work.mkdir()
        asyncsched.setdefault("refresh_interval", 3600.0)
        asyncsched.setdefault("full_resync_interval", 3600.0)
        asyncsched.setdefault("health_file", str(work / "health.json"))
        extra = {"state_dir": str(work), **(extra or {})}  # the pending-rollback journal
        config = seeding.daemon_config(
            transport_url=transport_url,
            api_url=self.db.api_url,
            placement=dataclasses.replace(
                PlacementOptions(),
                auth_type="none",
                endpoint_override=placement_url or self.placement.url,
                timeout=30.0,
            ),
            scheduler_host=name,
            **asyncsched,
        )
        text = seeding.config_file_text(config)
        text += "".join(f"{k} = {v}\n" for k, v in extra.items())  # [asyncsched] is last
        # Nothing heartbeats the seeded services: keep them up for the whole run.
        text += "[DEFAULT]\nservice_down_time = 86400\n"
        if rabbit:
            text += "[oslo_messaging_rabbit]\n" + "".join(f"{k} = {v}\n" for k, v in rabbit.items())
        (work / "asyncsched.conf").write_text(text)
        proc = ServeProcess(work / "asyncsched.conf", work / "stderr.log")
        self.daemons.append(proc)
        proc.start()
        if ready:
            proc.wait_ready()
        return proc

    def stderr_tails(self, limit: int = 3000) -> str:
        return "\n".join(
            f"--- {d.conf.parent.name} ---\n{d.stderr()[-limit:]}" for d in self.daemons
        )


RPC_COUNTS = ("received", "redelivered", "duplicates", "replies", "replies_dropped", "handed_back")


def rpc_counts(daemon: ServeProcess) -> dict[str, int]:
    """The daemon's own RPC counts, from the health file it writes when it stops (SIGTERM):
    what it received and what it replied (the broker confirmed), against what callers got.
    Empty when the file cannot be read."""
    try:
        health = json.loads((daemon.conf.parent / "health.json").read_text())
        stats = health["components"]["rpc"]["stats"]
    except (OSError, ValueError, KeyError):
        return {}
    return {k: int(stats.get(k, 0)) for k in RPC_COUNTS}


def latency_line(outcomes: Sequence[Outcome]) -> str:
    secs = [o.seconds for o in outcomes if o.kind == "ok"]
    p = percentiles(secs)
    mean = statistics.fmean(secs) if secs else 0.0
    return (
        f"ok latency p50 {p[50] * 1000:.0f} ms, p95 {p[95] * 1000:.0f} ms, "
        f"p99 {p[99] * 1000:.0f} ms, mean {mean * 1000:.0f} ms"
    )
