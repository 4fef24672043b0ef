"""Kept verdicts of state-only filters: computed again exactly for the hosts that changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np

from asyncsched.objects.models import RequestSpec
from asyncsched.scheduling.columns import HostColumns
from asyncsched.scheduling.filters.base import BaseHostFilter
from asyncsched.scheduling.verdicts import VerdictCache
from asyncsched.state.host_state import HostState
from tests.support.sched_helpers import config, host, spec


class RamAtLeast(BaseHostFilter):
    """Passes hosts with ``free_ram_mb`` >= the flavor's memory; counts the hosts it judged."""

    name = "RamAtLeast"

    def __init__(self) -> None:
        super().__init__(config())
        self.judged: list[str] = []

    def state_passes(self, state: HostState, spec: RequestSpec) -> str | None:
        self.judged.append(state.host)
        return None if state.free_ram_mb >= spec.flavor.memory_mb else "ram"

    def verdict_key(self, spec: RequestSpec) -> Hashable:
        return spec.flavor.memory_mb


def run(
    cache: VerdictCache, cols: HostColumns, f: RamAtLeast, hosts: Sequence[HostState], mb: int
) -> tuple[list[bool], Counter[str]]:
    s = spec(memory_mb=mb)
    slots = cols.slots(hosts)
    mask, reasons = cache.run(f, f.verdict_key(s), s, slots, lambda at: [hosts[i] for i in at])
    reference = f.filter_states(hosts, s)  # the per-host answer, judged afresh
    f.judged.clear()
    assert mask.tolist() == [c is None for c in reference]
    assert reasons == Counter(c for c in reference if c is not None)
    return mask.tolist(), reasons


def test_unchanged_hosts_reuse_their_verdicts_and_changed_ones_are_judged_again() -> None:
    hosts = [host(f"h{i}", free_ram_mb=1024 * (i % 4)) for i in range(12)]
    cols, f = HostColumns(), RamAtLeast()
    cache = VerdictCache(cols)
    s = spec(memory_mb=2048)
    slots = cols.slots(hosts)
    mask, _ = cache.run(f, 2048, s, slots, lambda at: [hosts[i] for i in at])
    assert len(f.judged) == 12 and mask.sum() == 6
    f.judged.clear()
    cache.run(f, 2048, s, slots, lambda at: [hosts[i] for i in at])
    assert f.judged == []  # nothing changed: nothing judged
    hosts[0].free_ram_mb = 4096  # h0 now fits
    hosts[0].touch()
    hosts[3].free_ram_mb = 0  # h3 no longer fits
    hosts[3].touch()
    mask, reasons = cache.run(f, 2048, s, cols.slots(hosts), lambda at: [hosts[i] for i in at])
    assert sorted(f.judged) == ["h0", "h3"]
    assert mask[0] and not mask[3] and reasons == Counter({"ram": 6})


def test_another_key_a_subset_and_renumbered_rows_are_each_right() -> None:
    hosts = [host(f"h{i}", free_ram_mb=512 * i) for i in range(10)]
    cols, f = HostColumns(), RamAtLeast()
    cache = VerdictCache(cols)
    run(cache, cols, f, hosts, 2048)
    run(cache, cols, f, hosts, 1024)  # another flavor: its own verdicts
    run(cache, cols, f, hosts[::3], 2048)  # some hosts only, in the request's order
    cols.forget_missing(hosts[5:])  # rows renumbered: the kept verdicts are void
    f.judged.clear()
    s = spec(memory_mb=2048)
    slots = cols.slots(hosts[5:])
    mask, _ = cache.run(f, 2048, s, slots, lambda at: [hosts[5:][i] for i in at])
    assert len(f.judged) == 5 and mask.tolist() == [True] * 5


def test_the_engine_judges_only_changed_hosts_for_the_nova_filters() -> None:
    from asyncsched.scheduling.engine import DecisionEngine
    from asyncsched.scheduling.filters.compute_capabilities_filter import (
        ComputeCapabilitiesFilter,
    )

    hosts = [host(f"h{i}", hypervisor_type="QEMU" if i % 2 else "KVM") for i in range(8)]
    f = ComputeCapabilitiesFilter(config())
    engine = DecisionEngine(config(), [f], [])
    s = spec(extra_specs={"capabilities:hypervisor_type": "QEMU"})
    rh = engine.start(hosts)
    assert rh.filter(s, 0) == 4
    assert engine.verdicts.computed == 8
    hosts[0].hypervisor_type = "QEMU"
    hosts[0].touch()
    rh = engine.start(hosts)
    assert rh.filter(s, 0) == 5
    assert engine.verdicts.computed == 9
    assert np.array_equal(rh.cur, [0, 1, 3, 5, 7])
