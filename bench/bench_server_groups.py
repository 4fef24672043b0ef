"""Server-group multi-creates at 10,000 hosts: the request's member index against the per-host
form (every host asked for every instance), measured in the same run, CPU seconds and ratio.

Default filters and all weighers (nova's defaults), nova's consumption between instances, one
ChangeLog over the hosts as the daemon's table keeps. The per-host form is the same engine with
the index switched off (what the code did before the index), run on an identical cloud; the
hosts chosen must be the same. The same request with no server group is the floor: what an
instance costs the rest of the decision. The per-host form of a long soft-affinity run costs
minutes, so it runs ``--old-soft`` instances of it and the per-instance figures are compared.

    .venv/bin/python -m bench.bench_server_groups [--hosts 10000] [--anti 1000]
        [--soft 20000] [--old-soft 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, InstanceGroup, RequestSpec
from asyncsched.scheduling.engine import DecisionEngine
from asyncsched.state.host_state import ChangeLog, HostState
from bench.synthetic_cloud import NOW, make_cloud, pipeline
from bench.synthetic_cloud import consume as _consume


def _cloud(n: int) -> list[HostState]:
    states, _ = make_cloud(n, random.Random(n), aggregates=False)
    log = ChangeLog()
    for s in states:
        s.changes = log
    return states


def run(n_hosts: int, policy: str | None, count: int, *, index: bool) -> tuple[float, list[str]]:
    """CPU seconds of ``count`` instances of one request, and the hosts chosen."""
    config = Config()
    filters, weighers = pipeline(config)
    eng = DecisionEngine(config, filters, weighers, clock=lambda: NOW, rng=random.Random(1))
    if not index:  # the per-host form: filter_states / weigh_states over every current host
        for step in eng.steps:
            step.members = False
        eng.member_weighers = {}
    states = _cloud(n_hosts)
    group = None if policy is None else InstanceGroup(uuid="g", policy=policy, policies=(policy,))
    s = RequestSpec(
        flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1), instance_group=group, num_instances=count
    )
    chosen: list[str] = []
    t0 = time.process_time()
    req = eng.start(states)
    for i in range(count):
        uuid = f"inst-{i}"
        s = dataclasses.replace(s, instance_uuid=uuid)
        if not req.filter(s, i) or not len(req):
            break
        h = states[req.pick(s).chosen_index]
        chosen.append(h.host)
        _consume(h, s, uuid)
        eng.refresh(h)
        g = s.instance_group
        if g is None:
            continue
        s = dataclasses.replace(
            s,
            instance_group=dataclasses.replace(
                g, hosts=(*g.hosts, h.host), members=(*g.members, uuid)
            ),
        )
    return time.process_time() - t0, chosen


def compare(n_hosts: int, policy: str, count: int, old_count: int) -> None:
    old_s, old_chosen = run(n_hosts, policy, old_count, index=False)
    new_s, new_chosen = run(n_hosts, policy, count, index=True)
    floor_s, floor_chosen = run(n_hosts, None, count, index=True)
    same = new_chosen[: len(old_chosen)] == old_chosen
    old_per, new_per = old_s / max(1, len(old_chosen)), new_s / max(1, len(new_chosen))
    print(
        f"{policy:>14} hosts={n_hosts} | per-host form: {len(old_chosen)} instances "
        f"{old_s:.2f} s CPU ({old_per * 1e3:.2f} ms each) | index: {len(new_chosen)} instances "
        f"{new_s:.2f} s CPU ({new_per * 1e3:.2f} ms each) | ratio per instance "
        f"{old_per / new_per:.1f}x | same hosts: {same} | no group (the floor): "
        f"{len(floor_chosen)} instances {floor_s:.2f} s CPU "
        f"({floor_s / max(1, len(floor_chosen)) * 1e3:.2f} ms each)"
    )
    if not same:
        raise SystemExit("the two forms chose different hosts")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--anti", type=int, default=1000)
    ap.add_argument("--soft", type=int, default=20000)
    ap.add_argument("--old-soft", type=int, default=2000)
    args = ap.parse_args(argv)
    compare(args.hosts, "anti-affinity", args.anti, args.anti)
    compare(args.hosts, "soft-affinity", args.soft, args.old_soft)


if __name__ == "__main__":
    main()
