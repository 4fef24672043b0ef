"""``make demo``: a local cloud, asyncsched in front of it, and a batch boot the way nova does it.

1. a fresh set of nova databases in the local PostgreSQL (API + cell0 + 2 cells) with a seeded
   demo cloud: 24 compute hosts of four sizes, two AZs, one host disabled for maintenance;
2. the real OpenStack Placement (openstack-placement under gunicorn) seeded to match: one
   provider per compute node, same uuid, OWNER_NOVA, inventories, AZ aggregates;
3. the real ``asyncsched serve --config-file F`` with a generated config, under a systemd-style
   notify socket; the demo waits for READY=1;
4. a 30-instance batch boot through the real oslo.messaging RPCClient, called exactly as
   nova-conductor calls select_destinations; a table of where each instance landed;
5. an anti-affinity group, a granular flavor, an impossible flavor (NoValidHost), Placement
   usage per host (every instance the demo placed);
6. "see why" on the admin endpoint ([asyncsched] admin_listen): ``asyncsched explain --host
   east-12`` (why not the disabled host) and ``asyncsched capacity`` (how many more fit);
7. SIGTERM to the daemon, then everything is removed again (databases, Placement, vhost),
   also when something fails on the way.

Run after tools/bootstrap.sh and tools/services.sh (``make demo`` does both).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
warnings.simplefilter("ignore")  # eventlet deprecation noise from oslo.messaging

from asyncsched.objects.models import InstanceGroup, Selection  # noqa: E402
from tests.support import broker  # noqa: E402
from tests.support.cloud import (  # noqa: E402
    AggregatePlan,
    Cloud,
    HostPlan,
    config_file_text,
    daemon_config,
    decode_reply,
    seed_cloud,
)
from tests.support.net import free_port  # noqa: E402
from tests.support.notify_listener import NotifyListener  # noqa: E402
from tests.support.nova_db import BACKENDS, Backend, NovaDB  # noqa: E402
from tests.support.nova_db_mysql import MysqlNovaDB  # noqa: E402
from tests.support.oslo_caller import (  # noqa: E402
    OsloSchedulerClient,
    fake_nova_exception,
    request_spec,
    request_spec_primitive,
)
from tests.support.placement_server import PlacementServer  # noqa: E402

SIZES = [  # (label, vcpus, memory MB, disk GB)
    ("small", 32, 131072, 2000),
    ("medium", 48, 196608, 3000),
    ("large", 64, 262144, 4000),
    ("xlarge", 96, 327680, 6000),
]
FLAVOR: dict[str, Any] = {"vcpus": 4, "memory_mb": 16384, "root_gb": 80}  # m1.xlarge-ish
BATCH = 30


def start_daemon(conf: Path, notify_socket: str, log: Path) -> subprocess.Popen[bytes]:
    """``asyncsched serve`` as systemd starts it: NOTIFY_SOCKET set, stderr to a log file."""
    env = dict(os.environ, NOTIFY_SOCKET=notify_socket, PYTHONUNBUFFERED="1")
    with open(log, "wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "asyncsched", "serve", "--config-file", str(conf)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def cli(args: list[str]) -> str:
    """``asyncsched ARGS`` as an operator types it; its output, indented."""
    done = subprocess.run(
        [sys.executable, "-m", "asyncsched", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        raise RuntimeError(f"asyncsched {args[0]} failed: {done.stderr.strip()}")
    return "".join(f"  {line}\n" for line in done.stdout.splitlines())


def placement_db_url(placement: PlacementServer) -> str:
    if placement.db_backend == "mysql":
        return placement.db_url  # mysql+pymysql://...?charset=utf8, as placement.conf has it
    return f"postgresql://root@127.0.0.1/{placement.db_name}"


class PathLog:
    """Which path each request's allocation candidates took, from the daemon's DEBUG log."""

    def __init__(self, log: Path) -> None:
        self.log = log
        self.pos = 0

    def _new_lines(self) -> list[str]:
        time.sleep(0.2)  # the daemon writes its log line as it answers
        text = self.log.read_text(errors="replace")
        lines, self.pos = text[self.pos :].splitlines(), len(text)
        return lines

    def loaded(self) -> str:
        for line in self._new_lines():
            if "placement mirror:" in line:
                return "placement " + line.split("placement ", 1)[1]
        return "placement mirror: not loaded (see the log)"

    def since(self) -> str:
        marks = ("allocation candidates from the mirror", "allocation candidates from Placement's")
        found = [
            line.split("allocation candidates from ", 1)[1]
            for line in self._new_lines()
            if any(m in line for m in marks)
        ]
        return "candidates: " + ("; ".join(found) if found else "none asked")


def log_tail(log: Path, lines: int = 40) -> str:
    if not log.exists():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def demo_cloud() -> tuple[list[HostPlan], list[AggregatePlan]]:
    """24 hosts: 12 per cell, sizes cycling; cell1 is AZ east, cell2 AZ west; one disabled."""
    hosts = []
    for cell, zone in ((0, "east"), (1, "west")):
        for i in range(12):
            _, vcpus, mem, disk = SIZES[i % len(SIZES)]
            hosts.append(
                HostPlan(
                    f"{zone}-{i + 1:02d}",
                    cell,
                    vcpus,
                    mem,
                    disk,
                    aggregates=(f"az-{zone}",),
                    disabled=(zone, i) == ("east", 11),  # the biggest east host is in maintenance
                )
            )
    aggs = [
        AggregatePlan("az-east", availability_zone="east"),
        AggregatePlan("az-west", availability_zone="west"),
    ]
    return hosts, aggs


def size_of(plan: HostPlan) -> str:
    return next(label for label, v, m, _ in SIZES if (v, m) == (plan.vcpus, plan.memory_mb))


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join("  " + x for x in out)


def spec(n: int, **kw: Any) -> dict[str, Any]:
    for key, value in FLAVOR.items():
        kw.setdefault(key, value)
    kw.setdefault("group_policy", None)
    kw.setdefault("availability_zone", None)
    return request_spec_primitive(num_instances=n, **kw)


def landing_rows(
    cloud: Cloud, cells: dict[str, str], uuids: list[str], sels: list[list[Selection]]
) -> list[list[str]]:
    rows = []
    for inst, per in zip(uuids, sels, strict=True):
        first = per[0]
        rows.append(
            [
                inst[:8],
                first.service_host,
                first.nodename,
                cells[first.cell_uuid],
                first.availability_zone or "-",
                size_of(cloud.hosts[first.service_host].plan),
                ", ".join(a.service_host for a in per[1:]) or "-",
            ]
        )
    return rows


async def call(client: OsloSchedulerClient, spec_obj: dict[str, Any], uuids: list[str]) -> Any:
    return await asyncio.to_thread(client.select_destinations, spec_obj, uuids)


async def run(tmp: Path, backend: Backend = "postgresql") -> int:
    vhost = f"asyncsched-demo-{uuid.uuid4().hex[:8]}"
    amqp = broker.amqp_url(vhost)
    db = (
        MysqlNovaDB(tmp / "nova-manage-mysql", prefix="asyncsched_demo")
        if backend == "mysql"
        else NovaDB(prefix="asyncsched_demo")
    )
    placement = PlacementServer(db_backend=backend)
    proc: subprocess.Popen[bytes] | None = None
    listener: NotifyListener | None = None
    client: OsloSchedulerClient | None = None
    log = tmp / "asyncsched.log"
    vhost_made = False
    try:
        t0 = time.monotonic()
        print("== 1. local stack: nova databases, Placement, RabbitMQ vhost")
        vhost_made = True
        broker.add_vhost(vhost)
        await db.create(n_cells=2)
        await asyncio.to_thread(placement.start)
        hosts, aggs = demo_cloud()
        async with placement.seeder() as seeder:
            cloud = await seed_cloud(db, seeder, hosts, aggs)
        cells = {c.uuid: c.name for c in db.cells}
        server = "MariaDB:   " if backend == "mysql" else "PostgreSQL:"
        print(f"  {server} {db.api_dbname} + cell0 + {', '.join(c.dbname for c in db.cells)}")
        print(f"  Placement:  {placement.url} (openstack-placement, database {placement.db_name})")
        print(f"  RabbitMQ:   vhost {vhost}")
        print(
            f"  seeded {len(cloud.hosts)} compute hosts in both (same uuids), AZs east/west, "
            f"east-12 disabled  [{time.monotonic() - t0:.1f} s]\n"
        )
        counts = Counter((h.plan.cell, size_of(h.plan)) for h in cloud.hosts.values())
        print(
            table(
                ["cell", "AZ", *[s[0] for s in SIZES]],
                [
                    [db.cells[c].name, zone, *[str(counts[(c, s[0])]) for s in SIZES]]
                    for c, zone in ((0, "east"), (1, "west"))
                ],
            )
        )

        print("\n== 2. asyncsched serve --config-file asyncsched.conf  (as systemd runs it)")
        config = daemon_config(
            transport_url=amqp,
            api_url=db.api_url,
            placement=placement.options,
            scheduler_host="demo-scheduler",
            drain_timeout=10.0,
            admin_listen=f"127.0.0.1:{free_port()}",  # explain, capacity, /metrics (step 7)
        )
        admin_url = f"http://{config.asyncsched.admin_listen}"
        conf = tmp / "asyncsched.conf"
        # The Placement mirror: asyncsched also reads placement.conf's [placement_database]
        # (as an operator adds --config-file /etc/placement/placement.conf); DEBUG shows the
        # path each request's candidates took.
        conf.write_text(
            config_file_text(config).replace("debug = False", "debug = True")
            + f"[placement_database]\nconnection = {placement_db_url(placement)}\n"
        )
        listener = NotifyListener()
        proc = start_daemon(conf, listener.address, log)
        t_start = time.monotonic()
        while True:
            msg = await asyncio.to_thread(listener.recv, 60.0)
            if "STATUS" in msg:
                print(f"  systemd status: {msg['STATUS']}")
            if msg.get("READY") == "1":
                break
        print(f"  READY=1 from pid {proc.pid} after {time.monotonic() - t_start:.1f} s")
        paths = PathLog(log)
        print(f"  {paths.loaded()}")

        client = OsloSchedulerClient(amqp, timeout=120.0, call_monitor_timeout=60.0)
        print(
            f"\n== 3. batch boot: {BATCH} instances of 4 vCPU / 16 GiB / 80 GB, one "
            "select_destinations call\n   through the oslo.messaging RPCClient, as "
            "nova-conductor makes it"
        )
        uuids = [str(uuid.uuid4()) for _ in range(BATCH)]
        t = time.monotonic()
        sels = decode_reply(await call(client, spec(BATCH), uuids))
        took = time.monotonic() - t
        print(
            table(
                ["instance", "host", "node", "cell", "AZ", "size", "alternates"],
                landing_rows(cloud, cells, uuids, sels),
            )
        )
        spread = Counter(s[0].service_host for s in sels)
        print(
            f"  {BATCH} instances placed and claimed in Placement in {took * 1000:.0f} ms "
            f"(round trip through RabbitMQ) on {len(spread)} hosts; "
            f"east-12 (disabled) chosen: {'yes' if 'east-12' in spread else 'no'}"
        )
        print(f"  {paths.since()}")

        print("\n== 4. anti-affinity server group, 4 instances, AZ west")
        group_uuids = [str(uuid.uuid4()) for _ in range(4)]
        group = InstanceGroup(
            uuid=str(uuid.uuid4()),
            name="web",
            policy="anti-affinity",
            policies=("anti-affinity",),
            members=tuple(group_uuids),
        )
        anti = replace(
            request_spec(
                num_instances=4,
                **FLAVOR,
                group_policy=None,
                availability_zone="west",
            ),
            instance_group=group,
            scheduler_hints={"group": (group.uuid,)},
        )
        t = time.monotonic()
        gsels = decode_reply(await call(client, request_spec_primitive(anti), group_uuids))
        took = time.monotonic() - t
        print(
            table(
                ["instance", "host", "node", "cell", "AZ", "size", "alternates"],
                landing_rows(cloud, cells, group_uuids, gsels),
            )
        )
        distinct = len({s[0].service_host for s in gsels})
        print(f"  distinct hosts: {distinct} of 4 ({took * 1000:.0f} ms)")
        print(f"  {paths.since()}")

        print(
            "\n== 4b. a granular flavor (resources1:VCPU=2): a shape the mirror leaves to Placement"
        )
        granular = request_spec(num_instances=1, **FLAVOR, group_policy=None)
        flavor = replace(
            granular.flavor,
            extra_specs={**granular.flavor.extra_specs, "resources1:VCPU": "2"},
        )
        one = [str(uuid.uuid4())]
        t = time.monotonic()
        gr = decode_reply(
            await call(client, request_spec_primitive(replace(granular, flavor=flavor)), one)
        )
        took = time.monotonic() - t
        print(f"  placed on {gr[0][0].service_host} in {took * 1000:.0f} ms")
        print(f"  {paths.since()}")

        print("\n== 5. an impossible flavor (2 TiB of RAM): NoValidHost, nothing claimed")
        bad = [str(uuid.uuid4())]
        with fake_nova_exception() as nova_exc:
            try:
                await call(client, spec(1, memory_mb=2 * 1024 * 1024), bad)
                print("  unexpected: it was scheduled")
                return 1
            except nova_exc.NoValidHost as exc:
                print(f"  nova.exception.NoValidHost: {str(exc).strip()}")
        print(f"  {paths.since()}")
        async with placement.seeder() as seeder:
            left = await seeder.allocations(bad[0])
        print(f"  allocations in Placement for it: {left['allocations'] or 'none'}")

        print("\n== 6. Placement usage per host (what asyncsched claimed, steps 3 to 4b)")
        rows = []
        async with placement.seeder() as seeder:
            per_host = Counter(s[0].service_host for s in [*sels, *gsels, *gr])
            usages = await asyncio.gather(
                *(seeder.usages(cloud.hosts[h].uuid) for h in sorted(cloud.hosts))
            )
        for h, usage in zip(sorted(cloud.hosts), usages, strict=True):
            plan = cloud.hosts[h].plan
            rows.append(
                [
                    h,
                    size_of(plan),
                    f"{usage.get('VCPU', 0)}/{plan.vcpus * 4}",
                    f"{usage.get('MEMORY_MB', 0) // 1024}/{plan.memory_mb // 1024}",
                    f"{usage.get('DISK_GB', 0)}/{plan.disk_gb}",
                    str(per_host.get(h, 0)),
                    "disabled" if plan.disabled else "",
                ]
            )
        print(table(["host", "size", "VCPU", "RAM GiB", "disk GB", "instances", ""], rows))

        print(
            f"\n== 7. see why: the admin endpoint ([asyncsched] admin_listen = "
            f"{config.asyncsched.admin_listen})"
        )
        words = ["--vcpus", "4", "--ram", "16384", "--disk", "80"]
        for args in (["explain", *words, "--top", "3", "--host", "east-12"], ["capacity", *words]):
            print(f"\n$ asyncsched {' '.join(args)} --url {admin_url}")
            print(await asyncio.to_thread(cli, [*args, "--url", admin_url]), end="")

        print("\n== 8. systemctl stop (SIGTERM): drain, close, exit")
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 60)
        print(f"  asyncsched exited with status {code}")
        print(f"\ndemo finished in {time.monotonic() - t0:.1f} s; cleaning up")
        return code
    except BaseException:
        print("---- asyncsched log (last 40 lines) ----", file=sys.stderr)
        print(log_tail(log), file=sys.stderr)
        raise
    finally:
        if client is not None:
            client.close()
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if listener is not None:
            listener.close()
        await asyncio.to_thread(placement.stop)
        await db.drop()
        if vhost_made:
            broker.delete_vhost(vhost)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The demo of README's make demo.")
    ap.add_argument(
        "--db",
        choices=BACKENDS,
        default="postgresql",
        help="where nova's and Placement's databases are (make demo DB=mysql: MariaDB)",
    )
    backend: Backend = ap.parse_args(argv).db
    with tempfile.TemporaryDirectory(prefix="asyncsched-demo-", dir="/tmp") as tmp:
        return asyncio.run(run(Path(tmp), backend))


if __name__ == "__main__":
    raise SystemExit(main())
