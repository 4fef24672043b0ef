"""Every nova operation under the real nova 34 control plane, for each scheduler (issue #20).

The scenarios, written once; each ``test_nova_ops_<scheduler>.py`` file runs all of them
against one scheduler on its own plane (``SCHEDULER`` there, read by the ``scheduler``
fixture), so ``--dist loadfile`` can give each scheduler its own worker: the real
nova-scheduler 34, ``asyncsched serve`` and ``asyncsched serve`` with the Placement mirror.
Each drives nova's REST API only, and checks both the scheduling rule and the allocations
Placement holds afterwards: exactly the flavor on the server's host, nothing for a migration,
nothing for a server that failed or was deleted - what nova-scheduler leaves.
"""

from __future__ import annotations

import signal
from collections import Counter
from functools import partial

from tests.integration.nova.servers import FLAVORS, Servers
from tests.support.nova_control_plane import COMPUTES, RESCHEDULER, ZONES, poll


def test_boot(nova: Servers) -> None:
    (sid,) = nova.boot("boot")
    host = nova.host(sid)
    assert host in COMPUTES
    nova.assert_allocated(sid, host)


def test_multi_create_30(nova: Servers) -> None:
    ids = nova.boot("multi", count=30)
    hosts = {sid: nova.host(sid) for sid in ids}
    for sid, host in hosts.items():
        nova.assert_allocated(sid, host)
    used = nova.placement.used()
    assert sum(u["MEMORY_MB"] for u in used.values()) == 30 * FLAVORS["small"]["MEMORY_MB"]


def test_affinity(nova: Servers) -> None:
    group = nova.group("affinity")
    ids = nova.boot("aff", count=3, hints={"group": group})
    hosts = {nova.host(sid) for sid in ids}
    assert len(hosts) == 1
    for sid in ids:
        nova.assert_allocated(sid, hosts.copy().pop())


def test_anti_affinity(nova: Servers) -> None:
    group = nova.group("anti-affinity")
    ids = nova.boot("anti", count=3, hints={"group": group})
    hosts = [nova.host(sid) for sid in ids]
    assert len(set(hosts)) == 3
    for sid, host in zip(ids, hosts, strict=True):
        nova.assert_allocated(sid, host)


def test_soft_affinity(nova: Servers) -> None:
    # One request at a time: nova's soft-affinity weigher counts the members already on a
    # host, and the members of one multi-create are not on any host yet.
    group = nova.group("soft-affinity")
    ids = [nova.boot(f"softaff{i}", hints={"group": group})[0] for i in range(3)]
    hosts = {nova.host(sid) for sid in ids}
    assert len(hosts) == 1
    for sid in ids:
        nova.assert_allocated(sid, next(iter(hosts)))


def test_soft_anti_affinity(nova: Servers) -> None:
    # One request at a time, as for soft-affinity: the weigher counts members on a host.
    group = nova.group("soft-anti-affinity")
    ids = [nova.boot(f"softanti{i}", hints={"group": group})[0] for i in range(4)]
    hosts = [nova.host(sid) for sid in ids]
    assert sorted(hosts) == sorted(COMPUTES)
    for sid, host in zip(ids, hosts, strict=True):
        nova.assert_allocated(sid, host)


def test_max_server_per_host(nova: Servers) -> None:
    group = nova.group("anti-affinity", {"max_server_per_host": 2})
    ids = nova.boot("maxper", count=6, hints={"group": group})
    hosts = [nova.host(sid) for sid in ids]
    assert max(Counter(hosts).values()) <= 2
    for sid, host in zip(ids, hosts, strict=True):
        nova.assert_allocated(sid, host)


def test_same_host_and_different_host(nova: Servers) -> None:
    (first,) = nova.boot("first")
    (same,) = nova.boot("same", hints={"same_host": [first]})
    (diff,) = nova.boot("diff", hints={"different_host": [first]})
    host = nova.host(first)
    assert nova.host(same) == host
    assert nova.host(diff) != host
    nova.assert_allocated(same, host)
    nova.assert_allocated(diff, nova.host(diff))


def test_availability_zone(nova: Servers) -> None:
    ids = nova.boot("inaz", count=3, zone="az2")
    for sid in ids:
        host = nova.host(sid)
        assert host in ZONES["az2"]
        assert nova.show(sid)["OS-EXT-AZ:availability_zone"] == "az2"
        nova.assert_allocated(sid, host)


def test_flavor_too_big(nova: Servers) -> None:
    before = nova.placement.used()
    (sid,) = nova.boot("toobig", "toobig", wait="ERROR")
    assert "No valid host" in str(nova.show(sid).get("fault")), nova.show(sid)
    assert nova.allocations(sid) == {}
    assert nova.placement.used() == before


def test_disable_enable_then_boot_at_once(nova: Servers) -> None:
    only, other = COMPUTES[0], COMPUTES[1]
    for host in COMPUTES[1:]:
        nova.plane.set_service(host, status="disabled")
    (a,) = nova.boot("only-enabled")
    assert nova.host(a) == only
    # Enable one, disable the other, boot within the same second: nova reads the services
    # on every request, so only the host just enabled is valid.
    nova.plane.set_service(other, status="enabled")
    nova.plane.set_service(only, status="disabled")
    (b,) = nova.boot("just-enabled")
    assert nova.host(b) == other
    nova.assert_allocated(a, only)
    nova.assert_allocated(b, other)


def test_down_compute_not_chosen_until_back(nova: Servers) -> None:
    silent = COMPUTES[0]
    for host in COMPUTES[1:]:
        nova.plane.set_service(host, status="disabled")
    nova.plane.computes[silent].signal(signal.SIGSTOP)
    poll(
        f"{silent} down", lambda: True if nova.plane.services()[silent]["state"] == "down" else None
    )
    (refused,) = nova.boot("while-down", wait="ERROR")
    assert "No valid host" in str(nova.show(refused).get("fault"))
    assert nova.allocations(refused) == {}
    nova.plane.computes[silent].signal(signal.SIGCONT)
    poll(f"{silent} up", lambda: True if nova.plane.services()[silent]["state"] == "up" else None)
    (sid,) = nova.boot("back-up")
    assert nova.host(sid) == silent
    nova.assert_allocated(sid, silent)


def _resize(nova: Servers, sid: str, body: dict[str, object], version: str = "2.95") -> str:
    """Start a resize or cold migration; wait for VERIFY_RESIZE; the migration uuid."""
    nova.action(sid, body, version=version)
    nova.wait(sid, "VERIFY_RESIZE")
    return str(nova.wait_migration(sid, 1, "finished")["uuid"])


def test_resize_confirm(nova: Servers) -> None:
    (sid,) = nova.boot("resize")
    source = nova.host(sid)
    migration = _resize(nova, sid, {"resize": {"flavorRef": "medium"}})
    dest = nova.host(sid)
    assert dest != source  # allow_resize_to_same_host = False: the source is ignored
    nova.assert_allocated(sid, dest, "medium")
    nova.assert_allocated(migration, source, "small")
    nova.action(sid, {"confirmResize": None})
    nova.wait(sid, "ACTIVE")
    poll("migration allocation gone", lambda: True if nova.allocations(migration) == {} else None)
    nova.assert_allocated(sid, dest, "medium")


def test_resize_revert(nova: Servers) -> None:
    (sid,) = nova.boot("revert")
    source = nova.host(sid)
    migration = _resize(nova, sid, {"resize": {"flavorRef": "medium"}})
    assert nova.host(sid) != source
    nova.action(sid, {"revertResize": None})
    nova.wait(sid, "ACTIVE")
    poll("back on the source", lambda: True if nova.host(sid) == source else None)
    assert nova.allocations(migration) == {}
    nova.assert_allocated(sid, source, "small")


def test_resize_to_same_host(nova: Servers) -> None:
    """Through a nova-api with ``allow_resize_to_same_host = True``, with every other compute
    disabled: the source is the one valid host (without the option: NoValidHost)."""
    (sid,) = nova.boot("resize-same")
    source = nova.host(sid)
    for host in COMPUTES:
        if host != source:
            nova.plane.set_service(host, status="disabled")
    nova.plane.same_host_api().action(sid, {"resize": {"flavorRef": "medium"}})
    nova.wait(sid, "VERIFY_RESIZE")
    migration = str(nova.wait_migration(sid, 1, "finished")["uuid"])
    assert nova.host(sid) == source
    nova.assert_allocated(sid, source, "medium")
    nova.assert_allocated(migration, source, "small")
    nova.action(sid, {"confirmResize": None})
    nova.wait(sid, "ACTIVE")
    poll("migration allocation gone", lambda: True if nova.allocations(migration) == {} else None)
    nova.assert_allocated(sid, source, "medium")


def test_cold_migrate_scheduler_chosen(nova: Servers) -> None:
    (sid,) = nova.boot("cold")
    source = nova.host(sid)
    migration = _resize(nova, sid, {"migrate": None})
    dest = nova.host(sid)
    assert dest != source
    nova.assert_allocated(migration, source)
    nova.action(sid, {"confirmResize": None})
    nova.wait(sid, "ACTIVE")
    poll("migration allocation gone", lambda: True if nova.allocations(migration) == {} else None)
    nova.assert_allocated(sid, dest)


def test_cold_migrate_to_named_host(nova: Servers) -> None:
    (sid,) = nova.boot("cold-named")
    source = nova.host(sid)
    target = next(h for h in reversed(COMPUTES) if h != source)
    _resize(nova, sid, {"migrate": {"host": target}}, version="2.56")
    assert nova.host(sid) == target
    nova.action(sid, {"confirmResize": None})
    nova.wait(sid, "ACTIVE")
    nova.assert_allocated(sid, target)


def _live_migrate(nova: Servers, sid: str, host: str | None, status: str) -> None:
    nova.action(sid, {"os-migrateLive": {"host": host, "block_migration": "auto"}})
    nova.wait_migration(sid, 1, status)
    nova.wait(sid, "ACTIVE")


def test_live_migrate_scheduler_chosen(nova: Servers) -> None:
    (sid,) = nova.boot("live")
    source = nova.host(sid)
    _live_migrate(nova, sid, None, "completed")
    dest = nova.host(sid)
    assert dest != source
    nova.assert_allocated(sid, dest)


def test_live_migrate_to_named_host(nova: Servers) -> None:
    (sid,) = nova.boot("live-named")
    source = nova.host(sid)
    target = next(h for h in COMPUTES if h != source)
    _live_migrate(nova, sid, target, "completed")
    assert nova.host(sid) == target
    nova.assert_allocated(sid, target)


def test_live_migrate_to_host_that_cannot_fit(nova: Servers) -> None:
    (sid,) = nova.boot("live-nofit", "large")
    source = nova.host(sid)
    full = next(h for h in COMPUTES if h != source)
    (filler,) = nova.boot("filler", "huge", zone=f"{nova.plane.zone_of(full)}:{full}")
    assert nova.host(filler) == full
    _live_migrate(nova, sid, full, "error")
    assert nova.show(sid)["status"] == "ACTIVE"
    assert nova.host(sid) == source
    nova.assert_allocated(sid, source, "large")
    nova.assert_allocated(filler, full, "huge")


def test_evacuate(nova: Servers) -> None:
    """Scheduler-chosen, to a named host, and a member of an anti-affinity group whose
    only valid host is the one no member is on."""
    group = nova.group("anti-affinity")
    members = nova.boot("evac-member", count=3, hints={"group": group})
    member_hosts = {sid: nova.host(sid) for sid in members}
    member = members[0]
    dead = member_hosts[member]
    (free,) = set(COMPUTES) - set(member_hosts.values())
    zone = nova.plane.zone_of(dead)
    chosen, named = nova.boot("evac", count=2, zone=f"{zone}:{dead}")
    # The servers' RequestSpec keeps the zone they were booted into: nova's
    # map_az_to_placement_aggregate asks Placement for it on every move, a named host too
    # (member_of the zone's aggregate and in_tree the host), so a host of another zone has
    # no candidate with nova-scheduler either. The named host is dead's zone partner.
    target = next(h for h in ZONES[zone] if h != dead)
    # The host dies and the operator fences it and forces it down at once (what force-down is
    # for): nova reports it down without waiting for service_down_time.
    nova.plane.kill_compute(dead)
    nova.plane.set_service(dead, forced_down=True)
    assert nova.plane.services()[dead]["state"] == "down"
    # 2.94: the evacuated server comes up ACTIVE (2.95 leaves it stopped).
    nova.action(chosen, {"evacuate": {}}, version="2.94")
    nova.action(named, {"evacuate": {"host": target}}, version="2.94")
    nova.action(member, {"evacuate": {}}, version="2.94")
    for sid in (chosen, named, member):
        nova.wait_migration(sid, 1, "done")
        nova.wait(sid, "ACTIVE")
    assert nova.host(chosen) != dead
    assert nova.host(named) == target
    assert nova.host(member) == free
    # nova keeps the source's allocation until the source compute is back and cleans up.
    for sid in (chosen, named, member):
        assert nova.allocations(sid) == {
            dead: dict(FLAVORS["small"]),
            nova.host(sid): dict(FLAVORS["small"]),
        }
    nova.plane.reset_services()
    for sid in (chosen, named, member):
        poll(f"{sid}'s source allocation dropped", partial(_left, nova, sid, dead))
        nova.assert_allocated(sid, nova.host(sid))


def _left(nova: Servers, sid: str, host: str) -> bool | None:
    """True once ``sid`` holds nothing on ``host`` (a poll probe)."""
    return True if host not in nova.allocations(sid) else None


def test_shelve_offload_unshelve(nova: Servers) -> None:
    (sid,) = nova.boot("shelve")
    host = nova.host(sid)
    nova.action(sid, {"shelve": None})
    nova.wait(sid, "SHELVED")
    nova.assert_allocated(sid, host)
    nova.action(sid, {"shelveOffload": None})
    nova.wait(sid, "SHELVED_OFFLOADED")
    assert nova.allocations(sid) == {}
    nova.action(sid, {"unshelve": None})
    nova.wait(sid, "ACTIVE")
    nova.assert_allocated(sid, nova.host(sid))


def test_unshelve_to_availability_zone(nova: Servers) -> None:
    (sid,) = nova.boot("unshelve-az", zone="az1")
    nova.action(sid, {"shelve": None})
    nova.wait(sid, "SHELVED")
    nova.action(sid, {"shelveOffload": None})
    nova.wait(sid, "SHELVED_OFFLOADED")
    nova.action(sid, {"unshelve": {"availability_zone": "az2"}}, version="2.77")
    nova.wait(sid, "ACTIVE")
    host = nova.host(sid)
    assert host in ZONES["az2"]
    nova.assert_allocated(sid, host)


def test_rebuild_with_new_image(nova: Servers) -> None:
    (sid,) = nova.boot("rebuild")
    host = nova.host(sid)
    nova.action(sid, {"rebuild": {"imageRef": nova.plane.image2}})
    poll("rebuilt", lambda: True if nova.show(sid)["image"]["id"] == nova.plane.image2 else None)
    nova.wait(sid, "ACTIVE")
    assert nova.host(sid) == host
    nova.assert_allocated(sid, host)


def test_reschedule_through_alternates(nova: Servers) -> None:
    """compute5 (``fake.FakeRescheduleDriver``) fails the first spawn of every instance; it
    offers the most of everything, so once enabled it is the first choice and the build goes
    to an alternate of the same Selection list."""
    plane = nova.plane
    plane.set_service(RESCHEDULER, status="enabled")
    try:
        (sid,) = nova.boot("resched")
    finally:
        plane.set_service(RESCHEDULER, status="disabled", disabled_reason="reschedule only")
    host = nova.host(sid)
    assert host in COMPUTES
    assert sid in plane.computes[RESCHEDULER].log_tail(10_000_000)
    nova.assert_allocated(sid, host)


def test_delete_everything(nova: Servers) -> None:
    nova.boot("last", count=4)
    nova.created = []
    listed = nova.api.get("/servers?all_tenants=1")["servers"]
    nova.delete(s["id"] for s in listed)
    assert nova.api.get("/servers?all_tenants=1")["servers"] == []
    assert nova.placement.used() == {}


#: What a ``test_nova_ops_<scheduler>.py`` file takes with ``from ... import *``: every
#: scenario (in the order written), and only them: a new ``test_`` function here runs for
#: every scheduler.
__all__ = [name for name in list(globals()) if name.startswith("test_")]
