"""rpc.validation: the bounds a request must stay within, and the names Placement accepts."""

from __future__ import annotations

import re
import uuid
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from placement.schemas import common as placement_schemas

from asyncsched.objects import codec, models
from asyncsched.objects.codec import CodecError, primitives
from asyncsched.objects.models import RequestSpec
from asyncsched.rpc import validation
from asyncsched.rpc.validation import RequestBounds, check_message, check_select_destinations
from tests.support import nova_primitives as P

BOUNDS = RequestBounds(max_instances=100)


def _spec(**changes: Any) -> RequestSpec:
    return replace(codec.decode_request_spec(P.request_spec()), **changes)


def _refused(spec: RequestSpec, uuids: list[str] | None = None) -> CodecError:
    with pytest.raises(CodecError) as info:
        check_select_destinations(spec, uuids, BOUNDS)
    return info.value


def _uuids(n: int) -> list[str]:
    return [str(uuid.uuid4()) for _ in range(n)]


def test_a_nova_request_passes() -> None:
    spec = codec.decode_request_spec(P.request_spec())
    check_message({"args": {"spec_obj": P.request_spec()}, "method": "select_destinations"})
    check_select_destinations(spec, list(P.INSTANCE_UUIDS), BOUNDS)
    check_select_destinations(spec, None, BOUNDS)


def test_nesting_depth_is_bounded() -> None:
    deep: Any = "leaf"
    for _ in range(validation.MAX_DEPTH - 1):
        deep = [deep]
    check_message({"args": deep})  # args at depth 1, the innermost list at MAX_DEPTH - 1
    with pytest.raises(CodecError, match="nested deeper than 32 levels") as info:
        check_message({"args": {"x": deep}})
    assert info.value.path.startswith("message.args.x[0][0]")


def test_string_length_is_bounded_for_values_and_keys() -> None:
    check_message({"args": {"description": "d" * validation.MAX_STRING}})
    with pytest.raises(CodecError) as info:
        check_message({"args": {"description": "d" * (validation.MAX_STRING + 1)}})
    assert info.value.path == "message.args.description"
    assert "65537 characters" in info.value.problem
    with pytest.raises(CodecError):
        check_message({"args": {"k" * (validation.MAX_STRING + 1): 1}})


def test_a_lone_surrogate_is_refused_naming_where_it_is() -> None:
    with pytest.raises(CodecError) as info:
        check_message({"args": {"extra_specs": {"trait:CUSTOM_\ud800": "required"}}})
    # The path shows the key escaped, so the reply and the log line can always be encoded.
    assert info.value.path == "message.args.extra_specs['trait:CUSTOM_\\ud800']"
    assert "lone surrogate '\\ud800'" in info.value.problem
    str(info.value).encode("utf-8")
    with pytest.raises(CodecError, match="lone surrogate"):
        check_message({"args": ["ok", "bad \udfff"]})


@pytest.mark.parametrize("num", [0, -1, 101, 10**12])
def test_num_instances_is_bounded(num: int) -> None:
    error = _refused(_spec(num_instances=num))
    assert error.path == "args.spec_obj.num_instances"
    assert "max_instances_per_request allows 1 to 100" in error.problem


def test_the_instance_uuid_list_is_bounded() -> None:
    check_select_destinations(_spec(num_instances=100), _uuids(100), BOUNDS)
    error = _refused(_spec(num_instances=1), _uuids(101))
    assert error.path == "args.instance_uuids" and error.problem.startswith("101 instances")


@pytest.mark.parametrize(
    "bad", ["../resource_providers", "i-1", "", "6f1e2d3c4b5a49688776a5b4c3d2e1f0xxxx", "\ud800"]
)
def test_instance_uuids_must_be_uuids(bad: str) -> None:
    error = _refused(_spec(num_instances=2), [str(uuid.uuid4()), bad])
    assert error.path == "args.instance_uuids[1]" and "is not a UUID" in error.problem
    str(error).encode("utf-8")


def test_instance_uuids_must_not_repeat() -> None:
    one = str(uuid.uuid4())
    error = _refused(_spec(num_instances=3), [one, str(uuid.uuid4()), one.upper()])
    assert error.path == "args.instance_uuids[2]"
    assert error.problem == f"{one.upper()} repeats args.instance_uuids[0]"


def _with_extra_specs(**specs: str) -> RequestSpec:
    spec = _spec()
    return replace(spec, flavor=replace(spec.flavor, extra_specs=specs))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("trait:custom_lower", "required"),
        ("trait1:CUSTOM_A-B", "forbidden"),
        ("trait:CUSTOM_\ud800", "required"),
        ("trait:" + "A" * 256, "required"),
        ("resources:CUSTOM_gpu", "1"),
        ("resources_g1:CUSTOM_A,B", "1"),
    ],
)
def test_names_placement_would_refuse_are_refused_with_the_extra_spec(key: str, value: str) -> None:
    error = _refused(_with_extra_specs(**{key: value}))
    assert error.path.startswith("args.spec_obj.flavor.extra_specs[")
    assert "is not one Placement accepts" in error.problem
    str(error).encode("utf-8")


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("trait:CUSTOM_OK_1", "required"),
        ("trait:whatever", "preferred"),  # nova ignores kinds other than required/forbidden
        ("resources:foo", "1"),  # nova skips classes that are neither standard nor CUSTOM_
        ("hw:cpu_policy", "dedicated"),
    ],
)
def test_names_nova_does_not_send_are_left_to_nova_semantics(key: str, value: str) -> None:
    check_select_destinations(_with_extra_specs(**{key: value}), None, BOUNDS)


def test_names_from_the_image_groups_and_root_params_are_checked() -> None:
    spec = _spec()
    bad_image = replace(
        spec,
        image=models.ImageMeta(
            properties=models.ImageMetaProps(traits_required=frozenset({"x y"}))
        ),
    )
    assert _refused(bad_image).path == "args.spec_obj.image.properties.traits_required"
    bad_group = replace(
        spec, requested_resources=(models.RequestGroup(resources={"VCPU": 1, "a:b": 1}),)
    )
    assert _refused(bad_group).path == "args.spec_obj.requested_resources[0].resources"
    bad_trait = replace(
        spec, requested_resources=(models.RequestGroup(forbidden_traits=frozenset({"!X"})),)
    )
    assert "requested_resources[0]" in _refused(bad_trait).path
    bad_root = replace(
        spec, request_level_params=models.RequestLevelParams(root_required=frozenset({"é"}))
    )
    assert "root_required" in _refused(bad_root).path


def test_the_legacy_path_is_named_for_legacy_requests() -> None:
    spec = codec.request_spec_from_legacy(
        {"instance_type": {"memory_mb": 1, "vcpus": 1}, "num_instances": 10**9}, {}
    )
    with pytest.raises(CodecError) as info:
        check_select_destinations(spec, None, BOUNDS, spec_path="args.request_spec")
    assert info.value.path == "args.request_spec.num_instances"


_PLACEMENT_NAME = re.compile(placement_schemas.RC_PATTERN)


@given(st.text(alphabet=st.sampled_from("AZaz09_-:,!é \ud800"), min_size=1, max_size=12))
def test_trait_names_are_accepted_exactly_when_placements_own_pattern_accepts_them(
    name: str,
) -> None:
    spec = replace(
        _spec(),
        flavor=models.Flavor(memory_mb=1, vcpus=1, extra_specs={f"trait:{name}": "required"}),
    )
    placement_accepts = _PLACEMENT_NAME.match(name) is not None
    try:
        check_select_destinations(spec, None, BOUNDS)
    except CodecError:
        assert not placement_accepts
    else:
        assert placement_accepts


def _nested(leaf: Any, levels: int) -> Any:
    for i in range(levels):
        leaf = [leaf] if i % 2 else {"k": leaf}
    return leaf


_STRINGS = st.one_of(
    st.text(alphabet=st.sampled_from("az é\ud800\udfff"), max_size=6),
    st.integers(validation.MAX_STRING - 1, validation.MAX_STRING + 1).map(lambda n: "s" * n),
)
_TREES = st.recursive(
    st.one_of(st.none(), st.integers(), _STRINGS),
    lambda kids: st.one_of(
        st.lists(kids, max_size=3),
        st.dictionaries(_STRINGS, kids, max_size=3),
        st.builds(_nested, kids, st.integers(25, 34)),
    ),
    max_leaves=8,
)


@given(_TREES)
def test_the_quick_walk_refuses_exactly_what_the_named_walk_names(tree: Any) -> None:
    """check_message walks without paths first: it must refuse a message exactly when the
    walk that names the field does, and with that walk's error."""
    message = {"args": tree}
    try:
        validation._check_named(message)
        named = None
    except CodecError as err:
        named = err
    if named is None:
        check_message(message)
        return
    with pytest.raises(CodecError) as info:
        check_message(message)
    assert (info.value.path, info.value.problem) == (named.path, named.problem)


@given(_TREES, st.sampled_from(["spec_obj", "request_spec", "filter_properties"]))
def test_what_check_message_accepts_the_codecs_depth_walk_accepts(tree: Any, arg: str) -> None:
    """The server's one walk is tighter than the codec's: a spec in a message check_message
    accepted can never be refused by ``check_depth``, so the decoders skip that second walk on
    the RPC path (``nesting_checked``) and nothing is refused differently."""
    for depth in (0, 3, 20, 29, 30, 31):
        spec = _nested(tree, depth)
        message = {"method": "select_destinations", "args": {arg: spec}}
        try:
            check_message(message)
        except CodecError:
            continue
        primitives.check_depth(spec, f"args.{arg}")


def test_the_depth_the_codec_walk_would_refuse_is_refused_by_check_message() -> None:
    deep: Any = 1
    for _ in range(primitives.MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(CodecError):
        primitives.check_depth(deep, "args.spec_obj")
    with pytest.raises(CodecError, match="nested deeper than 32 levels"):
        check_message({"args": {"spec_obj": deep}})
