"""LocalCandidates: Placement's answer for single-root requests, computed from a mirror state.

The same rules are checked against the real Placement in
tests/integration/candidates/test_candidates_differential.py; here each rule is pinned alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from asyncsched.objects.models import RequestGroup
from asyncsched.placement.candidates import Candidates
from asyncsched.placement.query import ResourceRequest
from asyncsched.scheduling.candidates import Fallback, LocalCandidates
from asyncsched.scheduling.candidates.local import PatchedSummaries
from tests.support.mirror_data import Cloud, inv, request


def hosts(got: Candidates | Fallback) -> set[str]:
    assert isinstance(got, Candidates), got
    return {next(iter(ar["allocations"])) for ar in got.allocation_requests}


def test_allocation_request_and_summary_have_placements_shape() -> None:
    c = Cloud()
    c.compute("a", traits=("OWNER_NOVA", "CUSTOM_FAST"), used={"VCPU": 3})
    got = LocalCandidates().compute(c.state(), request({"VCPU": 2, "MEMORY_MB": 1024}))
    assert isinstance(got, Candidates)
    assert got.allocation_requests == [
        {
            "allocations": {"a": {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}},
            "mappings": {"": ["a"]},
        }
    ]
    assert got.provider_summaries == {
        "a": {
            "resources": {
                "VCPU": {"capacity": 8, "used": 3},
                "MEMORY_MB": {"capacity": 8192, "used": 0},
                "DISK_GB": {"capacity": 100, "used": 0},
            },
            "traits": ["CUSTOM_FAST", "OWNER_NOVA"],
            "parent_provider_uuid": None,
            "root_provider_uuid": "a",
        }
    }
    assert got.alloc_reqs_by_rp_uuid == {"a": got.allocation_requests}
    assert got.version == "1.36"


@pytest.mark.parametrize(
    ("vcpu", "amount", "fits"),
    [
        (inv(10, reserved=2, ratio=1.5), 8, True),  # (10 - 2) * 1.5 = 12, 4 used
        (inv(10, reserved=2, ratio=1.5), 9, False),
        (inv(10, min_unit=2), 1, False),
        (inv(10, max_unit=4), 5, False),
        (inv(10, max_unit=4), 4, True),
        (inv(10, step=2), 3, False),
        (inv(10, step=2), 4, True),
        (inv(3, ratio=1.1), 0 + 1, False),  # int(3.3) = 3, 4 used: 5 > 3.3
        (inv(10, reserved=10), 1, False),
    ],
)
def test_capacity_min_max_step_reserved_ratio(vcpu: object, amount: int, fits: bool) -> None:
    c = Cloud()
    c.add("a", {"VCPU": vcpu}, used={"VCPU": 4})  # type: ignore[dict-item]
    got = LocalCandidates().compute(c.state(), request({"VCPU": amount}))
    assert hosts(got) == ({"a"} if fits else set())


def test_capacity_compares_before_truncation_like_placements_sql() -> None:
    c = Cloud()
    c.add("a", {"VCPU": inv(7, ratio=1.5)}, used={"VCPU": 10})  # 10.5 allowed; capacity 10
    got = LocalCandidates().compute(c.state(), request({"VCPU": 1}))
    assert hosts(got) == set()  # 11 > 10.5
    c.use(1, VCPU=9)
    got = LocalCandidates().compute(c.state(), request({"VCPU": 1}))
    assert hosts(got) == {"a"}
    assert isinstance(got, Candidates)
    assert got.provider_summaries["a"]["resources"]["VCPU"] == {"capacity": 10, "used": 9}


def test_missing_resource_class_excludes_the_host() -> None:
    c = Cloud()
    c.compute("a")
    c.add("b", {"VCPU": inv(8), "MEMORY_MB": inv(8192)})
    got = LocalCandidates().compute(c.state(), request({"VCPU": 1, "DISK_GB": 1}))
    assert hosts(got) == {"a"}


def test_required_and_forbidden_traits() -> None:
    c = Cloud()
    c.compute("plain")
    c.compute("fast", traits=("OWNER_NOVA", "CUSTOM_FAST"))
    c.compute("disabled", traits=("OWNER_NOVA", "CUSTOM_FAST", "COMPUTE_STATUS_DISABLED"))
    lc = LocalCandidates()
    state = c.state()
    assert hosts(lc.compute(state, request(required=["CUSTOM_FAST"]))) == {"fast", "disabled"}
    got = lc.compute(
        state, request(required=["CUSTOM_FAST"], forbidden=["COMPUTE_STATUS_DISABLED"])
    )
    assert hosts(got) == {"fast"}
    assert hosts(lc.compute(state, request(forbidden=["CUSTOM_FAST"]))) == {"plain"}


def test_member_of_any_of_each_list_and_forbidden_aggregates() -> None:
    c = Cloud()
    c.compute("a1", aggregates=("A",))
    c.compute("b1", aggregates=("B",))
    c.compute("ab", aggregates=("A", "B"))
    c.compute("none")
    lc, s = LocalCandidates(), c.state()
    assert hosts(lc.compute(s, request(member_of=[["A", "B"]]))) == {"a1", "b1", "ab"}
    assert hosts(lc.compute(s, request(member_of=[["A"], ["B"]]))) == {"ab"}
    assert hosts(lc.compute(s, request(not_in=["A"]))) == {"b1", "none"}
    assert hosts(lc.compute(s, request(member_of=[["A", "B"]], not_in=["B"]))) == {"a1"}
    assert hosts(lc.compute(s, request(member_of=[["nowhere"]]))) == set()


def test_in_tree_names_one_tree() -> None:
    c = Cloud()
    c.compute("a")
    c.compute("b")
    c.add("b-child", {"CUSTOM_GPU": inv(2)}, parent="b")
    lc, s = LocalCandidates(), c.state()
    assert hosts(lc.compute(s, request(in_tree="a"))) == {"a"}
    assert hosts(lc.compute(s, request(in_tree="b-child"))) == {"b"}  # its root
    assert isinstance(lc.compute(s, request(in_tree="unknown")), Fallback)


def test_root_required_and_forbidden_filter_and_summarise_only_the_chosen_roots() -> None:
    c = Cloud()
    c.compute("gold", traits=("OWNER_NOVA", "CUSTOM_GOLD"))
    c.compute("plain")
    got = LocalCandidates().compute(c.state(), request(root_required=["CUSTOM_GOLD"]))
    assert hosts(got) == {"gold"}
    # Placement trims the summaries to the trees of its allocation requests.
    assert isinstance(got, Candidates) and set(got.provider_summaries) == {"gold"}
    forb = LocalCandidates().compute(c.state(), request(root_forbidden=["CUSTOM_GOLD"]))
    assert hosts(forb) == {"plain"}
    assert isinstance(forb, Candidates) and set(forb.provider_summaries) == {"plain"}


def test_summaries_list_every_provider_of_a_candidates_tree() -> None:
    c = Cloud()
    c.compute("cn")
    c.add(
        "gpu", {"CUSTOM_GPU": inv(4)}, parent="cn", traits=("CUSTOM_FAST",), used={"CUSTOM_GPU": 1}
    )
    c.add("bare", parent="gpu", traits=())
    got = LocalCandidates().compute(c.state(), request())
    assert isinstance(got, Candidates)
    assert hosts(got) == {"cn"}
    assert set(got.provider_summaries) == {"cn", "gpu", "bare"}
    assert got.provider_summaries["gpu"] == {
        "resources": {"CUSTOM_GPU": {"capacity": 4, "used": 1}},
        "traits": ["CUSTOM_FAST"],
        "parent_provider_uuid": "cn",
        "root_provider_uuid": "cn",
    }
    assert got.provider_summaries["bare"]["resources"] == {}
    assert got.provider_summaries["bare"]["parent_provider_uuid"] == "gpu"


def test_pending_claims_of_this_process_count_as_used() -> None:
    c = Cloud()
    c.compute("a", vcpu=4)
    c.compute("b", vcpu=4)
    pending = {"a": {"VCPU": 3}}
    got = LocalCandidates().compute(c.state(), request({"VCPU": 2}), pending)
    assert hosts(got) == {"b"}
    got = LocalCandidates().compute(c.state(), request({"VCPU": 1}), pending)
    assert isinstance(got, Candidates)
    assert got.provider_summaries["a"]["resources"]["VCPU"]["used"] == 3


@pytest.mark.parametrize(
    ("build", "req", "reason"),
    [
        (
            lambda c: c.add("child", {"VCPU": inv(4)}, parent="a"),
            request(),
            "VCPU offered by a nested provider",
        ),
        (
            lambda c: c.add(
                "nfs",
                {"DISK_GB": inv(1000)},
                traits=("MISC_SHARES_VIA_AGGREGATE",),
                aggregates=("A",),
            ),
            request({"VCPU": 1, "DISK_GB": 10}),
            "DISK_GB offered by a sharing provider",
        ),
        (lambda c: None, request({}), "resourceless request group"),
        (lambda c: None, request({"CUSTOM_NEW": 1}), "resource class CUSTOM_NEW unknown"),
        (lambda c: None, request(required=["CUSTOM_NEW"]), "trait CUSTOM_NEW unknown"),
        (lambda c: None, request(root_forbidden=["CUSTOM_NEW"]), "trait CUSTOM_NEW unknown"),
        (
            lambda c: None,
            request(
                extra_groups=[
                    RequestGroup(
                        use_same_provider=True, resources={"CUSTOM_GPU": 1}, requester_id="1"
                    )
                ]
            ),
            "granular request groups",
        ),
    ],
)
def test_shapes_the_mirror_cannot_answer_exactly_fall_back(
    build: object, req: ResourceRequest, reason: str
) -> None:
    c = Cloud()
    c.compute("a")
    build(c)  # type: ignore[operator]
    got = LocalCandidates().compute(c.state(), req)
    assert isinstance(got, Fallback) and got.reason.startswith(reason), got


def test_same_subtree_and_suffixed_only_fall_back() -> None:
    c = Cloud()
    c.compute("a")
    g = RequestGroup(use_same_provider=True, resources={"VCPU": 1}, requester_id="1")
    got = LocalCandidates().compute(c.state(), ResourceRequest(groups=(g,)))
    assert isinstance(got, Fallback)
    base = request()
    req = ResourceRequest(groups=base.groups, same_subtree=(("1", "2"),))
    assert isinstance(LocalCandidates().compute(c.state(), req), Fallback)


def test_a_sharing_provider_of_an_unrequested_class_keeps_the_local_path() -> None:
    c = Cloud()
    c.compute("a", aggregates=("A",))
    c.add("nfs", {"DISK_GB": inv(1000)}, traits=("MISC_SHARES_VIA_AGGREGATE",), aggregates=("A",))
    got = LocalCandidates().compute(c.state(), request({"VCPU": 1, "MEMORY_MB": 1}))
    assert hosts(got) == {"a"}


def test_no_limit_every_matching_host_is_returned() -> None:
    c = Cloud()
    for i in range(1500):
        c.compute(f"h{i:04d}")
    req = ResourceRequest(groups=request().groups, limit=1000)
    assert len(hosts(LocalCandidates().compute(c.state(), req))) == 1500


@pytest.mark.parametrize("told", [False, True], ids=["found", "told_by_the_mirror"])
def test_columns_followed_across_refreshes_answer_like_columns_built_anew(told: bool) -> None:
    """A refresh changes a few providers; the patched columns must equal fresh ones, whether
    the changed roots are found by a pass over them or named by the mirror's state
    (``MirrorState.with_providers``, as the reader makes it)."""
    import random

    from tests.support.mirror_data import TRAITS

    rng = random.Random(5)
    plain_traits = sorted(TRAITS - {"MISC_SHARES_VIA_AGGREGATE"})
    c = Cloud()
    for i in range(60):
        c.compute(f"h{i:02d}", vcpu=rng.choice([4, 8]), aggregates=rng.sample(["A", "B"], 1))
    kept = LocalCandidates()
    reqs = [
        request({"VCPU": 2, "MEMORY_MB": 512}),
        request({"VCPU": 4}, required=["CUSTOM_FAST"]),
        request({"VCPU": 1}, forbidden=["COMPUTE_STATUS_DISABLED"], member_of=[["A"]]),
        request({"DISK_GB": 50}, not_in=["B"]),
    ]
    state = c.state()
    for _ in range(30):
        moved = set()
        for _ in range(rng.randint(0, 6)):
            rp_id = rng.randint(1, 60)
            moved.add(rp_id)
            p = c.providers[rp_id]
            what = rng.random()
            if what < 0.5:
                c.use(rp_id, VCPU=rng.randint(0, 8))
            elif what < 0.7:
                c.providers[rp_id] = replace(
                    p, traits=frozenset(rng.sample(plain_traits, rng.randint(0, 3)))
                )
            elif what < 0.85:
                c.providers[rp_id] = replace(
                    p, aggregates=frozenset(rng.sample(["A", "B", "C"], 1))
                )
            else:
                c.providers[rp_id] = replace(
                    p, inventories={**p.inventories, "DISK_GB": inv(rng.choice([10, 100]))}
                )
        state = state.with_providers(dict(c.providers), moved) if told else c.state()
        for req in reqs:
            a, b = kept.compute(state, req), LocalCandidates().compute(state, req)
            assert isinstance(a, Candidates) and isinstance(b, Candidates)
            # the answer carried over from the previous state is the fresh one, in order
            assert a.allocation_requests == b.allocation_requests
            assert list(a.provider_summaries.items()) == list(b.provider_summaries.items())
            assert list(a.alloc_reqs_by_rp_uuid.items()) == list(b.alloc_reqs_by_rp_uuid.items())
    assert kept.patched > 20, kept.patched  # most refreshes took the patch path


def test_a_reused_answer_patched_with_pending_claims_equals_one_computed_anew() -> None:
    """The per-state answer is kept and patched with this process's pending claims: for any
    pending amounts (on roots that then no longer fit, on roots that still do, on nested
    providers, on providers no candidate shows) it must equal the answer computed anew."""
    import random

    rng = random.Random(11)
    c = Cloud()
    for i in range(40):
        c.compute(f"h{i:02d}", vcpu=rng.choice([2, 4, 8]), mem=rng.choice([1024, 4096]))
        if i % 5 == 0:
            c.add(f"h{i:02d}-gpu", {"CUSTOM_GPU": inv(2)}, parent=f"h{i:02d}")
    uuids = [p.uuid for p in c.providers.values()]
    state = c.state()
    kept = LocalCandidates()
    reqs = [request({"VCPU": 2, "MEMORY_MB": 512}), request({"VCPU": 1}, member_of=[])]
    for _ in range(200):
        pending = {
            u: {rc: rng.randint(0, 6) for rc in rng.sample(["VCPU", "MEMORY_MB", "CUSTOM_GPU"], 2)}
            for u in rng.sample(uuids, rng.randint(0, 8))
        }
        for req in reqs:
            a = kept.compute(state, req, pending)
            b = LocalCandidates(reuse_answers=False).compute(state, req, pending)
            assert isinstance(a, Candidates) and isinstance(b, Candidates)
            assert a.allocation_requests == b.allocation_requests
            assert list(a.provider_summaries.items()) == list(b.provider_summaries.items())
            assert list(a.alloc_reqs_by_rp_uuid.items()) == list(b.alloc_reqs_by_rp_uuid.items())
            # the patched summaries answer lookups as the dict built anew does
            assert len(a.provider_summaries) == len(b.provider_summaries)
            for u in uuids:
                assert (u in a.provider_summaries) == (u in b.provider_summaries)
                assert a.provider_summaries.get(u) == b.provider_summaries.get(u)
    # the state's own answer is not changed by the patches made from it
    clean = kept.compute(state, reqs[0])
    fresh = LocalCandidates(reuse_answers=False).compute(state, reqs[0])
    assert isinstance(clean, Candidates) and isinstance(fresh, Candidates)
    assert list(clean.provider_summaries.items()) == list(fresh.provider_summaries.items())
    assert clean.allocation_requests == fresh.allocation_requests


def test_pending_claims_dropping_the_same_roots_cost_no_pass_over_the_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Requests between two refreshes whose pending claims fill the same hosts get the same
    allocation requests objects (the scheduler's host view is kept per object) without a
    pass over every host; more pending claims on hosts still fitting only patch summaries;
    a newly full host drops anew. Each answer equals the one computed anew."""
    from asyncsched.scheduling.candidates import local

    c = Cloud()
    for i in range(50):
        c.compute(f"h{i:02d}", vcpu=4)
    state, req = c.state(), request({"VCPU": 2})
    kept = LocalCandidates()
    passes: list[int] = []
    real_drop = local._drop

    def counted(*a: Any) -> Any:
        passes.append(1)
        return real_drop(*a)

    monkeypatch.setattr(local, "_drop", counted)

    def check(pending: dict[str, dict[str, int]]) -> Candidates:
        a = kept.compute(state, req, pending)
        b = LocalCandidates(reuse_answers=False).compute(state, req, pending)
        assert isinstance(a, Candidates) and isinstance(b, Candidates)
        assert a.allocation_requests == b.allocation_requests
        assert list(a.provider_summaries.items()) == list(b.provider_summaries.items())
        return a

    first = check({"h00": {"VCPU": 3}})
    again = check({"h00": {"VCPU": 3}, "h01": {"VCPU": 1}})  # h01 still fits
    assert again.alloc_reqs_by_rp_uuid is first.alloc_reqs_by_rp_uuid
    assert again.allocation_requests is first.allocation_requests
    assert len(passes) == 1
    assert again.provider_summaries["h01"]["resources"]["VCPU"]["used"] == 1
    full = check({"h00": {"VCPU": 3}, "h01": {"VCPU": 3}})  # h01 full now
    assert "h01" not in full.alloc_reqs_by_rp_uuid and len(passes) == 2


def test_refreshes_under_claims_keep_allocation_requests_and_layer_summaries() -> None:
    """Refreshes that change a few roots' usage (issue #24: a few of 100,000): the answer
    carried over keeps the same allocation-request objects while no root leaves (so the
    scheduler's host view holds), lays the changed summaries over the shared ones instead
    of copying them, and still equals the answer computed anew, in order, through roots
    filling up (leaving), coming back and the layer being flattened."""
    import random

    rng = random.Random(3)
    c = Cloud()
    for i in range(200):
        c.compute(f"h{i:03d}", vcpu=4)
    kept, req = LocalCandidates(), request({"VCPU": 2})
    state = c.state()
    prev = kept.compute(state, req)
    assert isinstance(prev, Candidates)
    layered = same_objects = 0
    for _ in range(60):
        moved = {rng.randint(1, 200) for _ in range(rng.randint(1, 3))}
        for rp_id in moved:
            c.use(rp_id, VCPU=rng.choice([0, 1, 2, 3]))  # 3: full for 2 VCPU, 0: back
        state = state.with_providers(dict(c.providers), moved)
        got = kept.compute(state, req)
        fresh = LocalCandidates().compute(state, req)
        assert isinstance(got, Candidates) and isinstance(fresh, Candidates)
        assert got.allocation_requests == fresh.allocation_requests
        assert list(got.provider_summaries.items()) == list(fresh.provider_summaries.items())
        assert len(got.provider_summaries) == len(fresh.provider_summaries)
        assert all(u in got.provider_summaries for u in fresh.provider_summaries)
        assert "h999" not in got.provider_summaries
        assert list(got.alloc_reqs_by_rp_uuid.items()) == list(fresh.alloc_reqs_by_rp_uuid.items())
        if set(got.alloc_reqs_by_rp_uuid) == set(prev.alloc_reqs_by_rp_uuid):
            same_objects += got.alloc_reqs_by_rp_uuid is prev.alloc_reqs_by_rp_uuid
        layered += isinstance(got.provider_summaries, PatchedSummaries)
        prev = got
    assert kept.patched > 30 and same_objects > 10 and layered > 10, (
        kept.patched,
        same_objects,
        layered,
    )


def test_summaries_layered_over_a_layer_merge_into_one_and_flatten_when_large() -> None:
    base = {f"h{i}": i for i in range(64)}
    one = PatchedSummaries.over(base, {"h1": "x"}, ["h2"])
    assert isinstance(one, PatchedSummaries)
    two = PatchedSummaries.over(one, {"h3": "y"}, ["h1"])  # h1 patched, then gone
    assert isinstance(two, PatchedSummaries) and two._base is base  # one layer deep
    want = {k: v for k, v in base.items() if k not in ("h1", "h2")} | {"h3": "y"}
    assert list(two.items()) == list(want.items()) and len(two) == 62
    assert "h1" not in two and "h2" not in two and two["h3"] == "y"
    with pytest.raises(KeyError):
        two["h1"]  # patched in the old layer, gone in this one
    big = PatchedSummaries.over(two, {"h4": "z"}, ["h5"])  # 5 changes of 64: flattened
    assert type(big) is dict
    want = {k: v for k, v in want.items() if k != "h5"} | {"h4": "z"}
    assert list(big.items()) == list(want.items())


def test_followed_columns_hand_over_usage_and_the_old_ones_still_answer_for_their_state() -> None:
    """``RootColumns.follow`` updates the usage columns in place for the new state; the
    columns it came from must still answer for their own state if asked (built again)."""
    import numpy as np

    from asyncsched.scheduling.candidates.columns import RootColumns

    c = Cloud()
    for i in range(40):
        c.compute(f"h{i:02d}", vcpu=8)
    first = c.state()
    old = RootColumns(first)
    before = old.resource("VCPU").fits(4).copy()
    c.use(3, VCPU=6)
    c.use(7, VCPU=8)
    second = first.with_providers(dict(c.providers), {3, 7})
    new = old.follow(second)
    assert np.array_equal(
        new.resource("VCPU").fits(4), RootColumns(second).resource("VCPU").fits(4)
    )
    assert not new.resource("VCPU").fits(4)[2] and before[2]  # h03 (row 2) no longer fits
    assert np.array_equal(old.resource("VCPU").fits(4), before)  # the old state's answer
    rows = np.array([0, 2, 6], dtype=np.intp)
    assert np.array_equal(new.resource("VCPU").fits(4, rows), new.resource("VCPU").fits(4)[rows])


@pytest.mark.parametrize("told", [False, True], ids=["found", "told_by_the_mirror"])
def test_a_mix_of_queries_each_answer_brought_up_to_date_over_several_refreshes(
    told: bool,
) -> None:
    """A mix of flavors: each refresh only some queries are asked, so an answer is patched
    from the state it was made on, several refreshes back (through the mirror's chain of
    moves when told, a pass over the roots otherwise). It must equal the answer computed
    anew, in order, and most of them must come by the patch, not a build."""
    import random

    rng = random.Random(23)
    c = Cloud()
    for i in range(50):
        c.compute(f"h{i:02d}", vcpu=rng.choice([4, 8]), mem=rng.choice([2048, 8192]))
    kept = LocalCandidates()
    reqs = [request({"VCPU": v, "MEMORY_MB": m}) for v in (1, 2, 4) for m in (512, 2048)]
    state = c.state()
    asked = 0
    for _ in range(60):
        moved = set()
        for _ in range(rng.randint(0, 3)):
            rp_id = rng.randint(1, 50)
            moved.add(rp_id)
            # usage only grows here: a root that joined an answer is built anew, not patched
            now = c.providers[rp_id].used.get("VCPU", 0)
            c.use(rp_id, VCPU=min(8, now + rng.randint(0, 2)))
        state = state.with_providers(dict(c.providers), moved) if told else c.state()
        for req in rng.sample(reqs, rng.randint(0, 2)):
            asked += 1
            a, b = kept.compute(state, req), LocalCandidates().compute(state, req)
            assert isinstance(a, Candidates) and isinstance(b, Candidates)
            assert a.allocation_requests == b.allocation_requests
            assert list(a.provider_summaries.items()) == list(b.provider_summaries.items())
            assert list(a.alloc_reqs_by_rp_uuid.items()) == list(b.alloc_reqs_by_rp_uuid.items())
    # every query after its first answer comes by the patch (six first answers were built)
    assert kept.patched >= asked - len(reqs) - 3, (kept.patched, asked)


def test_allocation_requests_share_their_read_only_parts_across_roots_and_flavors() -> None:
    """An answer per flavor over 100,000 roots: each root's mappings value is one object for
    every flavor, and one build's ``{"resources": ...}`` one object for every root (half the
    objects a flavor's answer makes), with the content Placement gives."""
    c = Cloud()
    for i in range(5):
        c.compute(f"h{i}", vcpu=8)
    kept = LocalCandidates()
    state = c.state()
    small = kept.compute(state, request({"VCPU": 1}))
    big = kept.compute(state, request({"VCPU": 2}))
    assert isinstance(small, Candidates) and isinstance(big, Candidates)
    for a, b in zip(small.allocation_requests, big.allocation_requests, strict=True):
        (u,) = a["allocations"]
        assert a["mappings"] == {"": [u]} and a["mappings"] is b["mappings"]
        assert a["allocations"][u] == {"resources": {"VCPU": 1}}
        assert b["allocations"][u] == {"resources": {"VCPU": 2}}
    firsts = {id(next(iter(a["allocations"].values()))) for a in small.allocation_requests}
    assert len(firsts) == 1


def test_an_answer_less_roots_names_the_answer_it_came_from() -> None:
    """A root leaves on a refresh, another one for a pending claim: each answer names the
    one it is, less those roots (the scheduler derives its host view from that one's)."""
    c = Cloud()
    ids = [c.compute(f"h{i}", vcpu=4) for i in range(6)]
    kept = LocalCandidates()
    req = request({"VCPU": 2})
    first = c.state()
    a = kept.compute(first, req)
    c.use(ids[1], VCPU=4)  # full: leaves
    second = first.with_providers(dict(c.providers), {ids[1]})
    b = kept.compute(second, req)
    p = kept.compute(second, req, {c.providers[ids[4]].uuid: {"VCPU": 3}})  # no longer fits
    assert isinstance(a, Candidates) and isinstance(b, Candidates) and isinstance(p, Candidates)
    h1, h4 = c.providers[ids[1]].uuid, c.providers[ids[4]].uuid
    assert a.derived is None
    assert b.derived == (a.alloc_reqs_by_rp_uuid, frozenset({h1}))
    assert p.derived == (b.alloc_reqs_by_rp_uuid, frozenset({h4}))
    for now, was in ((b, a), (p, b)):
        assert now.derived is not None
        less = now.derived[1]
        assert list(now.alloc_reqs_by_rp_uuid) == [
            u for u in was.alloc_reqs_by_rp_uuid if u not in less
        ]
        assert all(
            now.alloc_reqs_by_rp_uuid[u] is was.alloc_reqs_by_rp_uuid[u]
            for u in now.alloc_reqs_by_rp_uuid
        )


def test_a_mix_of_flavors_rebuilt_after_a_join_reuses_every_flavors_allocation_requests() -> None:
    """Six flavors in turn, then a root joins every answer (a full host freed): each answer is
    built anew, from the allocation requests its shape made before (``AREQ_SHAPES`` is
    ``ANSWERS``): no new objects a root, nothing new for the collector to walk."""
    c = Cloud()
    ids = [c.compute(f"h{i}", vcpu=8, mem=16384) for i in range(8)]
    c.use(ids[3], VCPU=8)  # full: in no answer
    kept = LocalCandidates()
    reqs = [request({"VCPU": 1 + f % 4, "MEMORY_MB": 512 * (1 + f)}) for f in range(6)]
    first = c.state()
    before = [kept.compute(first, r) for r in reqs]
    c.use(ids[3], VCPU=0)  # freed: joins every answer
    second = first.with_providers(dict(c.providers), {ids[3]})
    after = [kept.compute(second, r) for r in reqs]
    joined = c.providers[ids[3]].uuid
    for was, now in zip(before, after, strict=True):
        assert isinstance(was, Candidates) and isinstance(now, Candidates)
        assert joined in now.alloc_reqs_by_rp_uuid and joined not in was.alloc_reqs_by_rp_uuid
        for u, areqs in was.alloc_reqs_by_rp_uuid.items():
            assert now.alloc_reqs_by_rp_uuid[u] is areqs  # the same objects, not new ones


def test_a_build_tells_the_heaps_keeper_what_it_made_and_a_rebuild_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An answer's first build reports its allocation requests and summaries as kept objects
    (the daemon's keeper freezes them past ``KEEP_AT``); the same answer built again from
    them after a join reports only the joined root's summary."""
    from asyncsched.common import heap
    from asyncsched.scheduling.candidates import local

    told: list[int] = []

    class Told(heap.HeapKeeper):
        def made(self, objects: int) -> None:
            told.append(objects)

    monkeypatch.setattr(heap, "KEEPER", Told())
    c = Cloud()
    ids = [c.compute(f"h{i}", vcpu=8) for i in range(5)]
    kept = LocalCandidates()
    first = c.state()
    kept.compute(first, request({"VCPU": 1}))
    assert sum(told) == 5 * (local.AREQ_OBJECTS + local.SUMMARY_OBJECTS)
    told.clear()
    c.use(ids[0], VCPU=8)
    second = first.with_providers(dict(c.providers), {ids[0]})
    kept.compute(second, request({"VCPU": 1}))  # h0 left: patched, nothing built
    c.use(ids[0], VCPU=0)
    third = second.with_providers(dict(c.providers), {ids[0]})
    kept.compute(third, request({"VCPU": 1}))  # h0 joined: built anew from what was made
    assert sum(told) == local.SUMMARY_OBJECTS  # h0's new summary only
