"""The per-cell index diffing (``state.index``), without a database: which nodes a read
makes dirty, and what the index holds afterwards."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from asyncsched.state.host_state import HostState, ServiceInfo
from asyncsched.state.images import PropsRead
from asyncsched.state.index import CellIndex, NodeRead, apply_image_props, diff_changes, diff_full
from asyncsched.state.rows import NodeSnapshot
from tests.support.node_snapshots import CELL, snap


def read(*snaps: NodeSnapshot, deleted: tuple[str, ...] = ()) -> NodeRead:
    return NodeRead(
        snaps={s.uuid: s for s in snaps},
        live={s.uuid for s in snaps},
        deleted=set(deleted),
    )


def visible(index: CellIndex) -> dict[str, HostState]:
    """The table the cache would hold after rebuilding every node of ``index``."""
    return {
        u: HostState(
            uuid=u, host=s.host, nodename=s.nodename, cell_uuid=CELL, service=index.services[s.host]
        )
        for u, s in index.snaps.items()
    }


SA, SB = ServiceInfo(id=1, host="a"), ServiceInfo(id=2, host="b")
SERVICES = [(1, "a", SA), (2, "b", SB)]


def loaded() -> tuple[CellIndex, dict[str, HostState], NodeSnapshot, NodeSnapshot]:
    index = CellIndex()
    n1, n2 = snap("n1", "a"), snap("n2", "b")
    assert diff_full(index, {}, SERVICES, read(n1, n2), {"i1": "a", "i2": "b"}) == {"n1", "n2"}
    return index, visible(index), n1, n2


def test_first_full_read_fills_the_index_and_dirties_every_node() -> None:
    index, _, n1, _ = loaded()
    assert index.snaps["n1"] is n1 and index.nodes_by_host == {"a": {"n1"}, "b": {"n2"}}
    assert index.services == {"a": SA, "b": SB}
    assert index.host_insts == {"a": {"i1"}, "b": {"i2"}}
    assert index.inst_host == {"i1": "a", "i2": "b"}


def test_unchanged_full_read_dirties_nothing() -> None:
    index, table, n1, n2 = loaded()
    assert diff_full(index, table, SERVICES, read(n1, n2), {"i1": "a", "i2": "b"}) == set()


def test_full_read_dirties_exactly_what_changed() -> None:
    index, table, n1, n2 = loaded()
    n1b = replace(n1, free_ram_mb=5)
    # n1's row changed, i2 moved b -> a... so both; nothing else
    assert diff_full(index, table, SERVICES, read(n1b, n2), {"i1": "a", "i2": "a"}) == {
        "n1",
        "n2",
    }
    assert index.host_insts == {"a": {"i1", "i2"}}  # emptied hosts are dropped
    table = visible(index)
    # a node gone from the table and an instance gone: only their hosts
    assert diff_full(index, table, SERVICES, read(n1b), {"i2": "a"}) == {"n1", "n2"}
    assert set(index.snaps) == {"n1"} and index.nodes_by_host == {"a": {"n1"}}


def test_live_node_not_parsed_keeps_its_snapshot_and_assumed_hosts_are_dirty() -> None:
    index, table, n1, n2 = loaded()
    nodes = read(n2)
    nodes.live.add("n1")  # listed but its usage is "not updated yet"
    assert diff_full(index, table, SERVICES, nodes, {"i1": "a", "i2": "b"}) == set()
    assert index.snaps["n1"] is n1
    table["n2"].assumed["x"] = None  # type: ignore[assignment]  # only its presence counts
    assert diff_full(index, table, SERVICES, read(n1, n2), {"i1": "a", "i2": "b"}) == {"n2"}


def test_changes_heartbeat_swaps_the_service_without_a_rebuild() -> None:
    index, table, _, _ = loaded()
    beat = replace(SA, version=2)
    got = diff_changes(index, table, [(1, "a", beat)], NodeRead(), {})
    assert got.dirty == set() and got.heartbeats == {"n1": "a"}
    assert index.services["a"] is beat


def test_changes_service_gone_new_host_and_stale_delete() -> None:
    index, table, _, _ = loaded()
    sc = ServiceInfo(id=3, host="c")
    nc = snap("n3", "c")
    rows = [(9, "a", None), (2, "b", None), (3, "c", sc)]  # id 9 is not a's row: ignored
    got = diff_changes(index, table, rows, read(nc), {})
    assert got.dirty == {"n2", "n3"} and got.heartbeats == {}
    assert set(index.services) == {"a", "c"}
    assert index.nodes_by_host["c"] == {"n3"}


def test_changes_node_deleted_moved_and_instances() -> None:
    index, table, _, n2 = loaded()
    moved = replace(n2, host="a")
    got = diff_changes(index, table, [], read(moved, deleted=("n1",)), {"i3": "b", "i1": None})
    # n1 deleted, n2 moved to a; i3 lands on b (no node left there), i1 left a
    assert got.dirty == {"n1", "n2"}
    assert "n1" not in index.snaps and index.nodes_by_host == {"a": {"n2"}}
    assert index.inst_host == {"i2": "b", "i3": "b"}
    table["n2"].assumed["x"] = None  # type: ignore[assignment]
    assert diff_changes(index, table, [], NodeRead(), {}).dirty == {"n2"}


def test_image_props_full_then_partial() -> None:
    index, _, _, _ = loaded()
    p = MappingProxyType({"hw_machine_type": "q35"})
    # first full read: every host gets its view; instances not on a host are left out
    assert apply_image_props(index, PropsRead({"i1": p, "zz": p}, None)) == {"a", "b"}
    assert index.image_props == {"i1": p} and index.image_props_loaded
    assert apply_image_props(index, PropsRead({"i1": p}, None)) == set()  # same object
    assert apply_image_props(index, PropsRead({"i2": p}, {"i1", "i2"})) == {"a", "b"}
    assert index.image_props == {"i2": p}
    index.move_instance("i2", None)  # gone: its properties go with it
    assert index.image_props == {}
    assert apply_image_props(index, None) == set()


def test_a_reread_services_row_is_parsed_once_and_a_changed_one_again() -> None:
    """The watermark overlap reads each heartbeat's row several times: an unchanged row gives
    back the same ServiceInfo object; any changed column gives a new one with that change."""
    from datetime import datetime

    index = CellIndex()
    row: dict[str, object] = {
        "id": 7,
        "host": "cmp-1",
        "binary": "nova-compute",
        "disabled": False,
        "disabled_reason": None,
        "forced_down": False,
        "last_seen_up": datetime(2026, 11, 25, 12, 0, 0),
        "created_at": datetime(2026, 1, 1),
        "updated_at": datetime(2026, 11, 25, 12, 0, 0),
        "version": 66,
        "uuid": "5b2f0a3e-0000-4000-8000-000000000007",
        "deleted": 0,
    }
    first = index.service_of(row)
    assert index.service_of(dict(row)) is first
    beat = index.service_of({**row, "updated_at": datetime(2026, 11, 25, 12, 0, 10)})
    assert beat is not first and beat.updated_at is not None and beat.updated_at.second == 10
    off = index.service_of({**row, "disabled": True, "disabled_reason": "maintenance"})
    assert off.disabled and off.disabled_reason == "maintenance"
