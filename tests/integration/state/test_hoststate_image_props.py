"""ImagePropertiesWeigher over the real host-state cache and real nova cell databases.

The cache reads the instances' image properties from ``instance_system_metadata`` (only while
``[filter_scheduler] image_props_weight_multiplier`` is non-zero), keeps them current in the
incremental refresh (new instances, rebuilds, nova-manage edits with hard-deleted keys,
deletes, moves) and on SIGHUP; the decision runs through SchedulerManager with a small fake
Placement (the subject here is PostgreSQL + the cache).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from asyncsched.conf.options import Config
from asyncsched.objects.models import Flavor, ImageMeta, ImageMetaProps, RequestContext, RequestSpec
from asyncsched.scheduling.manager import SchedulerManager
from asyncsched.state.cache import HostStateCache
from asyncsched.state.host_state import HostState
from asyncsched.state.rows import IMAGE_PROP_COUNTS_KEY, IMAGE_PROPS_KEY
from tests.support.nova_db import CellDB, NodeSpec, NovaDB, old
from tests.support.sched_fakes import FakePlacement

pytestmark = pytest.mark.integration

UBUNTU = {"os_distro": "ubuntu", "hw_disk_bus": "virtio"}
FEDORA = {"os_distro": "fedora", "hw_disk_bus": "scsi"}


def with_multiplier(cfg: Config, multiplier: float) -> Config:
    fs = dataclasses.replace(cfg.filter_scheduler, image_props_weight_multiplier=multiplier)
    return dataclasses.replace(cfg, filter_scheduler=fs)


def boot(props: dict[str, Any]) -> RequestSpec:
    return RequestSpec(
        flavor=Flavor(memory_mb=512, vcpus=1, root_gb=1),
        image=ImageMeta(id=str(uuid.uuid4()), properties=ImageMetaProps(other=props)),
        project_id="demo",
        user_id="demo",
    )


async def chosen(mgr: SchedulerManager, props: dict[str, Any]) -> str:
    """The host one boot of an image with ``props`` lands on."""
    rows = await mgr.select_destinations(
        RequestContext(project_id="demo", user_id="demo"),
        boot(props),
        [str(uuid.uuid4())],
        True,
        False,
    )
    return rows[0][0].service_host


def images(hs: HostState | None) -> dict[str, dict[str, str]]:
    assert hs is not None
    return {u: dict(p) for u, p in hs.extra[IMAGE_PROPS_KEY].items()}


async def age(db: NovaDB, cell: CellDB, inst: str) -> None:
    """Make an instance's rows look written an hour ago (outside any watermark overlap)."""
    for table, col in (("instances", "uuid"), ("instance_system_metadata", "instance_uuid")):
        await db.cell_execute(
            cell,
            f"UPDATE {table} SET created_at = $2, updated_at = $2 WHERE {col} = $1",
            inst,
            old(3600),
        )


async def until(cond: Callable[[], bool], what: str) -> None:
    """Wait for background work the cache spawned (SIGHUP, casts)."""
    for _ in range(200):
        if cond():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def env(nova_db: NovaDB) -> AsyncIterator[dict[str, Any]]:
    """cell1: img-a with two ubuntu/virtio instances, img-b with one fedora/scsi instance."""
    c1: CellDB = nova_db.cells[0]
    ids: dict[str, Any] = {"db": nova_db, "cell": c1}
    ids["a"] = await nova_db.add_host(c1, NodeSpec(host="img-a"))
    ids["b"] = await nova_db.add_host(c1, NodeSpec(host="img-b"))
    ids["a1"] = await nova_db.add_instance(c1, "img-a", image_props=UBUNTU)
    ids["a2"] = await nova_db.add_instance(c1, "img-a", image_props={**UBUNTU, "hw_numa_nodes": 1})
    ids["b1"] = await nova_db.add_instance(c1, "img-b", image_props=FEDORA)
    # what else nova keeps in system metadata: never image properties
    await nova_db.add_system_metadata(
        c1,
        ids["a1"],
        {"owner_user_name": "demo", "image_min_ram": "0", "image_os_hash_value": "ab12"},
    )
    yield ids


async def test_loads_and_ranks_and_a_new_instance_changes_the_ranking(
    env: dict[str, Any],
) -> None:
    db: NovaDB = env["db"]
    cell: CellDB = env["cell"]
    cfg = with_multiplier(db.config(refresh_interval=3600), 10.0)
    async with HostStateCache(cfg) as cache:
        a, b = cache.get_by_uuid(env["a"]), cache.get_by_uuid(env["b"])
        assert a is not None and b is not None
        assert images(a) == {
            env["a1"]: UBUNTU,
            env["a2"]: {**UBUNTU, "hw_numa_nodes": "1"},
        }
        assert images(b) == {env["b1"]: FEDORA}
        assert a.extra[IMAGE_PROP_COUNTS_KEY][("os_distro", "ubuntu")] == 2
        health = cache.health()
        assert health["ok"]
        img = health["cells"][cell.uuid]["image_props"]
        assert img["loaded"] and img["instances"] == 3 and img["last_error"] is None
        assert img["images"] == 3  # shared parsed sets: ubuntu, ubuntu+numa, fedora

        mgr = SchedulerManager(cfg, cache, FakePlacement(cache.all_hosts()))
        assert await chosen(mgr, UBUNTU) == "img-a"
        assert await chosen(mgr, FEDORA) == "img-b"

        # three new ubuntu instances on img-b: after an incremental refresh it wins
        gen = b.generation
        new = [await db.add_instance(cell, "img-b", image_props=UBUNTU) for _ in range(3)]
        await cache.refresh()
        assert b.generation > gen
        assert set(images(b)) == {env["b1"], *new}
        assert b.extra[IMAGE_PROP_COUNTS_KEY][("hw_disk_bus", "virtio")] == 3
        assert await chosen(mgr, UBUNTU) == "img-b"


async def test_incremental_refresh_follows_every_kind_of_change(env: dict[str, Any]) -> None:
    """No request runs here, so no pending assumption makes a host re-read every pass: each
    change must be noticed for what it is."""
    db: NovaDB = env["db"]
    cell: CellDB = env["cell"]
    new = [await db.add_instance(cell, "img-b", image_props=UBUNTU) for _ in range(3)]
    for inst in new:
        await age(db, cell, inst)
    cfg = with_multiplier(db.config(refresh_interval=3600), 1.0)
    async with HostStateCache(cfg) as cache:
        a, b = cache.get_by_uuid(env["a"]), cache.get_by_uuid(env["b"])
        assert a is not None and b is not None and not a.assumed and not b.assumed
        assert set(images(b)) == {env["b1"], *new}

        # a rebuild to another image: values updated, the dropped key hard-deleted
        gen = b.generation
        await db.set_instance_image_props(cell, new[0], {"os_distro": "ubuntu"})
        await cache.refresh()
        assert images(b)[new[0]] == {"os_distro": "ubuntu"} and b.generation > gen
        assert b.extra[IMAGE_PROP_COUNTS_KEY][("hw_disk_bus", "virtio")] == 2

        # nova-manage image_property set: only system metadata changes, instances row not
        gen = b.generation
        await db.set_instance_image_props(
            cell, new[1], {**UBUNTU, "hw_machine_type": "q35"}, touch_instance=False
        )
        await cache.refresh()
        assert images(b)[new[1]] == {**UBUNTU, "hw_machine_type": "q35"} and b.generation > gen

        # a delete and a move between hosts
        await db.delete_instance(cell, new[2])
        await db.move_instance(cell, env["a2"], "img-b")
        await cache.refresh()
        assert set(images(a)) == {env["a1"]}
        assert set(images(b)) == {env["b1"], new[0], new[1], env["a2"]}
        health = cache.health()
        assert health["image_props_failures"] == 0
        assert health["cells"][cell.uuid]["image_props"]["instances"] == 5

        # nothing changed: a pass touches no host
        gens = (a.generation, b.generation)
        await cache.refresh()
        assert (a.generation, b.generation) == gens

        # a full resync rebuilds the same picture
        before = (images(a), images(b))
        await cache.refresh(full=True)
        assert (images(a), images(b)) == before


async def test_instance_learnt_from_a_cast_gets_its_image_props(env: dict[str, Any]) -> None:
    """Rows older than any watermark (clock skew, a host re-read after a cast mismatch) are
    read with the host's instance list."""
    db: NovaDB = env["db"]
    cell: CellDB = env["cell"]
    cfg = with_multiplier(db.config(refresh_interval=3600), 1.0)
    async with HostStateCache(cfg) as cache:
        a = cache.get_by_uuid(env["a"])
        late = await db.add_instance(cell, "img-a", image_props=FEDORA)
        await age(db, cell, late)
        await cache.refresh()
        assert late not in images(a)  # too old for the incremental pass
        await cache.events.sync_instance_info("img-a", [env["a1"], env["a2"], late])
        await until(lambda: late in images(a), "the re-read of img-a")
        assert images(a)[late] == FEDORA


async def test_multiplier_zero_reads_no_system_metadata(env: dict[str, Any]) -> None:
    """Default config: the table is never queried (dropping it changes nothing), and hosts
    carry no image data. With the weigher on, the same missing table is a visible, contained
    failure: hosts still load, the image data is reported stale."""
    db: NovaDB = env["db"]
    for cell in db.cells:
        await db.cell_execute(cell, "DROP TABLE instance_system_metadata")
    cfg = db.config(refresh_interval=3600)
    async with HostStateCache(cfg) as cache:
        await db.add_instance(env["cell"], "img-b")
        await cache.refresh()
        await cache.refresh(full=True)
        health = cache.health()
        assert health["ok"] and health["hosts"] == 2
        assert health["image_props_reads"] == 0 and health["image_props_failures"] == 0
        for hs in cache.all_hosts():
            assert IMAGE_PROPS_KEY not in hs.extra and IMAGE_PROP_COUNTS_KEY not in hs.extra
        b = cache.get_by_uuid(env["b"])
        assert b is not None and len(b.instances) == 2

    async with HostStateCache(with_multiplier(cfg, 1.0)) as cache:
        health = cache.health()
        assert health["ok"] and health["hosts"] == 2  # the host data is unaffected
        assert health["image_props_failures"] >= 1
        img = health["cells"][env["cell"].uuid]["image_props"]
        assert not img["loaded"] and "instance_system_metadata" in img["last_error"]
        await cache.refresh()
        assert cache.health()["ok"]


async def test_sighup_turns_loading_on_and_off(env: dict[str, Any]) -> None:
    db: NovaDB = env["db"]
    empty = await db.add_host(env["cell"], NodeSpec(host="img-c"))
    cfg = db.config(refresh_interval=3600)
    async with HostStateCache(cfg) as cache:
        a, c = cache.get_by_uuid(env["a"]), cache.get_by_uuid(empty)
        assert a is not None and c is not None and IMAGE_PROPS_KEY not in a.extra
        gen = a.generation

        cache.reconfigure(with_multiplier(cfg, 2.0))
        await until(lambda: IMAGE_PROPS_KEY in a.extra, "the load after SIGHUP")
        assert set(images(a)) == {env["a1"], env["a2"]}
        assert a.generation > gen
        assert images(c) == {} and c.extra[IMAGE_PROP_COUNTS_KEY] == {}  # every host gets a view
        mgr = SchedulerManager(with_multiplier(cfg, 2.0), cache, FakePlacement(cache.all_hosts()))
        assert await chosen(mgr, FEDORA) == "img-b"

        gen = a.generation
        cache.reconfigure(cfg)
        await until(lambda: IMAGE_PROPS_KEY not in a.extra, "the drop after SIGHUP")
        assert IMAGE_PROP_COUNTS_KEY not in a.extra and a.generation > gen
        assert cache.health()["cells"][env["cell"].uuid]["image_props"]["instances"] == 0
        reads = cache.health()["image_props_reads"]
        await cache.refresh()
        await cache.refresh(full=True)
        assert cache.health()["image_props_reads"] == reads
