"""Replica groups, source-target pairs and shardings: every printed form against its expansion."""

from __future__ import annotations

import contextlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from profan.errors import HloSyntaxError
from profan.hlo.devices import (
    decode_replica_groups,
    decode_sharding,
    decode_source_target_pairs,
    group_problems,
    iota_devices,
)


def _explicit(groups: list[list[int]]) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def _transpose_by_hand(dims: list[int], perm: list[int]) -> list[int]:
    """Independent reference: enumerate output multi-indices, read the source linear index."""
    import itertools

    out_dims = [dims[p] for p in perm]
    result = []
    for out_index in itertools.product(*[range(d) for d in out_dims]):
        source = [0] * len(dims)
        for axis, p in enumerate(perm):
            source[p] = out_index[axis]
        linear = 0
        for axis, size in enumerate(dims):
            linear = linear * size + source[axis]
        result.append(linear)
    return result


def test_explicit_groups() -> None:
    assert decode_replica_groups("{{0,1},{2,3}}") == [[0, 1], [2, 3]]
    assert decode_replica_groups("{ {0, 2} , {1,3} }") == [[0, 2], [1, 3]]


def test_empty_groups_mean_all_devices() -> None:
    assert decode_replica_groups("{}") == []
    assert decode_replica_groups("{}", num_devices=4) == [[0, 1, 2, 3]]


def test_iota_groups_equal_explicit() -> None:
    assert decode_replica_groups("[2,4]<=[8]") == decode_replica_groups("{{0,1,2,3},{4,5,6,7}}")
    assert decode_replica_groups("[1,8]<=[8]") == [list(range(8))]


def test_transposed_iota_groups_equal_explicit() -> None:
    assert decode_replica_groups("[2,4]<=[4,2]T(1,0)") == decode_replica_groups(
        "{{0,2,4,6},{1,3,5,7}}"
    )
    # A stride-16 split of 128 devices: 16 groups of 8.
    groups = decode_replica_groups("[16,8]<=[8,16]T(1,0)")
    assert groups[0] == [0, 16, 32, 48, 64, 80, 96, 112]
    assert groups[15] == [15 + 16 * i for i in range(8)]
    assert len(groups) == 16


def test_three_d_transposed_iota() -> None:
    # [4,2]<=[2,2,2]T(0,2,1): device = a*4 + b*2 + c laid out (a, c, b).
    assert decode_replica_groups("[4,2]<=[2,2,2]T(0,2,1)") == [[0, 2], [1, 3], [4, 6], [5, 7]]


@given(
    st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=4).flatmap(
        lambda dims: st.tuples(st.just(dims), st.permutations(list(range(len(dims)))))
    )
)
def test_iota_matches_reference_transpose(dims_perm: tuple[list[int], list[int]]) -> None:
    dims, perm = dims_perm
    assert iota_devices(dims, list(perm)) == _transpose_by_hand(dims, list(perm))


def test_mesh_groups_match_xla_semantics() -> None:
    # XLA's replica_group_test: mesh x=2,y=2; axis x → {0,2},{1,3}; y → {0,1},{2,3}; both → one.
    mesh = "mesh['axis_0'=2,'axis_1'=2]"
    assert decode_replica_groups(mesh + " {'axis_0'}") == [[0, 2], [1, 3]]
    assert decode_replica_groups(mesh + " {'axis_1'}") == [[0, 1], [2, 3]]
    assert decode_replica_groups(mesh + " {'axis_0','axis_1'}") == [[0, 1, 2, 3]]
    assert decode_replica_groups("@mesh<x=2,y=2> {x}") == [[0, 2], [1, 3]]


def test_mesh_groups_equal_iota_and_explicit() -> None:
    mesh_form = decode_replica_groups("mesh['axis_0'=4,'axis_1'=2] {'axis_0'}")
    iota_form = decode_replica_groups("[2,4]<=[4,2]T(1,0)")
    explicit = decode_replica_groups("{{0,2,4,6},{1,3,5,7}}")
    assert mesh_form == iota_form == explicit


def test_mesh_sub_axes() -> None:
    # a:(1)2 of a=6,b=6 → the major factor 2 of a: {0,18},{1,19}…
    groups = decode_replica_groups("mesh['a'=6,'b'=6] {'a':(1)2}")
    assert groups[:3] == [[0, 18], [1, 19], [2, 20]] and len(groups) == 18
    # b:(1)3 then a:(1)3: the first listed axis varies slowest within a group.
    groups = decode_replica_groups("mesh['a'=6,'b'=6] {'b':(1)3,'a':(1)3}")
    assert groups[0] == [0, 12, 24, 2, 14, 26, 4, 16, 28]
    # Sub-axes equal their iota spelling (XLA's MaterializedReplicaGroupsMatchExpectedV2).
    assert decode_replica_groups("mesh['a'=8] {'a':(2)2}") == decode_replica_groups(
        "[4,2]<=[2,2,2]T(0,2,1)"
    )
    assert decode_replica_groups("mesh['a'=8] {'a':(1)2,'a':(4)2}") == decode_replica_groups(
        "[2,4]<=[2,2,2]T(1,0,2)"
    )


def test_mesh_with_device_ids() -> None:
    groups = decode_replica_groups("mesh['x'=2,'y'=2, device_ids=(3,1,0,2)] {'x'}")
    assert groups == [[3, 0], [1, 2]]
    iota_ids = decode_replica_groups("@mesh<a=2,b=2>, device_ids=([2,2]T(1,0)) {b}")
    assert iota_ids == [[0, 2], [1, 3]]


def test_source_target_pairs() -> None:
    assert decode_source_target_pairs("{{0,1},{1,2},{2,0}}") == [(0, 1), (1, 2), (2, 0)]
    assert decode_source_target_pairs("{}") == []


@pytest.mark.parametrize(
    "text",
    [
        "{{0,1},{2,3}",
        "[2,4]<=[7]",
        "[2,4]<=[4,2]T(1,1)",
        "{{0,x}}",
        "mesh['a'=2] {'b'}",
        "mesh['a'=6] {'a':(4)2}",
        "mesh['a'=2,'b'=2, device_ids=(0,1,2)] {'a'}",
        "[2]<=[2]",
        "",
        "{{0,1}} trailing",
    ],
)
def test_bad_replica_groups_raise_syntax_error(text: str) -> None:
    with pytest.raises(HloSyntaxError) as error:
        decode_replica_groups(text)
    assert "replica_groups" in str(error.value)


@pytest.mark.parametrize("text", ["{{0,1,2}}", "{{0}", "{0,1}", "{{a,b}}"])
def test_bad_pairs_raise_syntax_error(text: str) -> None:
    with pytest.raises(HloSyntaxError):
        decode_source_target_pairs(text)


@given(st.text(max_size=40))
def test_random_text_never_crashes(text: str) -> None:
    for decode in (decode_replica_groups, decode_source_target_pairs, decode_sharding):
        with contextlib.suppress(HloSyntaxError):
            decode(text)


def test_group_problems() -> None:
    assert group_problems([[0, 1], [2, 3]], 4) == []
    assert any("device 1 is in group 0 and group 1" in p for p in group_problems([[0, 1], [1, 2]]))
    assert any("unequal sizes" in p for p in group_problems([[0, 1, 2], [3]]))
    assert any("in no group" in p for p in group_problems([[0, 1]], 4))


# --- shardings ------------------------------------------------------------------------------


def test_simple_shardings() -> None:
    assert decode_sharding("{replicated}").kind == "replicated"
    assert decode_sharding("{manual}").kind == "manual"
    assert decode_sharding("{unknown shard_as 0}").shard_group == "shard_as 0"
    maximal = decode_sharding("{maximal device=3}")
    assert maximal.kind == "maximal" and maximal.device == 3
    with_metadata = decode_sharding('{replicated metadata={op_name="a{b}" source_line=3}}')
    assert with_metadata.kind == "replicated"


def test_legacy_and_iota_tiled_equal() -> None:
    legacy = decode_sharding("{devices=[2,2]0,2,1,3}")
    iota = decode_sharding("{devices=[2,2]<=[2,2]T(1,0)}")
    assert legacy.tile_dims == iota.tile_dims == (2, 2)
    assert legacy.devices == iota.devices == (0, 2, 1, 3)
    assert legacy.global_dims((4, 8)) == (8, 16)


def test_last_tile_dim_replicate() -> None:
    sharding = decode_sharding("{devices=[4,1,2]<=[8] last_tile_dim_replicate}")
    assert sharding.replicate_on_last_tile_dim
    assert sharding.subgroup_types == ("replicated",)
    assert sharding.data_tile_dims == (4, 1)
    assert sharding.global_dims((16, 128)) == (64, 128)
    # Devices that jointly span dim 0: every other device, i.e. stride 2.
    assert sharding.device_groups_along(0) == [[0, 2, 4, 6], [1, 3, 5, 7]]
    legacy = decode_sharding("{devices=[4,1,2]0,1,2,3,4,5,6,7 last_tile_dim_replicate}")
    assert legacy == sharding


def test_last_tile_dims_subgroups() -> None:
    sharding = decode_sharding("{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}")
    assert sharding.subgroup_types == ("manual", "replicated")
    assert sharding.data_tile_dims == (2, 1)
    assert not sharding.replicate_on_last_tile_dim


def test_tuple_sharding() -> None:
    sharding = decode_sharding("{{replicated}, /*index=1*/{devices=[2,1]0,1}, {maximal device=0}}")
    assert sharding.kind == "tuple"
    assert [e.kind for e in sharding.elements] == ["replicated", "tiled", "maximal"]
    assert decode_sharding("{}").kind == "tuple"


def test_mesh_sharding_equals_iota() -> None:
    mesh = decode_sharding("{mesh['x'=2,'y'=2] [{'x'}, {'y'}]}")
    iota = decode_sharding("{devices=[2,2]<=[4]}")
    assert mesh.tile_dims == iota.tile_dims and mesh.devices == iota.devices
    assert mesh.dim_axes == (("x",), ("y",))
    replicated = decode_sharding("{mesh['x'=2,'y'=2] [{'y'}, {}], replicated={'x'}}")
    same = decode_sharding("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert replicated.tile_dims == same.tile_dims and replicated.devices == same.devices
    both = decode_sharding("{mesh['a'=2, 'b'=2], [{'a', 'b'}, {}]}")
    assert both.tile_dims == (4, 1) and both.devices == (0, 1, 2, 3)


def test_mesh_sharding_unreduced_and_device_ids() -> None:
    sharding = decode_sharding("{mesh['x'=2], [{}, {}], unreduced=max{'x'}}")
    assert sharding.subgroup_types == ("unreduced",) and sharding.tile_dims == (1, 1, 2)
    ordered = decode_sharding(
        "{mesh['x'=2,'y'=2], device_ids=(3,2,1,0), [{'x'}, {}], replicated={'y'}}"
    )
    assert ordered.devices == (3, 2, 1, 0)


@pytest.mark.parametrize(
    "text",
    [
        "{devices=[2,2]0,1,2}",
        "{devices=[2,2]0,1,2,2}",
        "{devices=[2,2]<=[8]}",
        "{devices=[2,1]0,1 last_tile_dims={bogus}}",
        "{maximal}",
        "{replicated",
        "{tiled}",
        "devices=[2]0,1",
        "{mesh['x'=2] [{'z'}]}",
        '{replicated metadata={op_name="a}',
    ],
)
def test_bad_sharding_raises_syntax_error(text: str) -> None:
    with pytest.raises(HloSyntaxError) as error:
        decode_sharding(text)
    assert "sharding" in str(error.value)


def test_every_corpus_form_decodes_or_fails_cleanly(corpus_dir) -> None:
    """Each replica_groups/sharding value XLA accepted decodes; nothing raises anything else."""
    import json

    manifest = corpus_dir / "hlo" / "xla" / "MANIFEST.jsonl"
    accepted = {
        row["file"]
        for row in map(json.loads, manifest.read_text().splitlines())
        if row.get("xla_parses")
    }
    groups_re = re.compile(
        r"replica_groups=(\{\}|\{\{[\d,{} ]*\}\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?"
        r"|mesh\[[^\]]*\]\s*\{[^}]*\})"
    )
    decoded = 0
    failures: list[str] = []
    for name in sorted(accepted):
        text = (corpus_dir / "hlo" / "xla" / name).read_text(errors="replace")
        if "replica_groups=" not in text:
            continue
        for match in groups_re.finditer(text):
            try:
                decode_replica_groups(match.group(1))
                decoded += 1
            except HloSyntaxError as error:
                failures.append(f"{name}: {error}")
    assert decoded > 500
    # XLA's parser accepts an iota list whose reshape holds more ids than the groups (it never
    # expands it); that is the only kind of value allowed to fail here.
    assert all("holds" in f for f in failures), failures
    assert len(failures) <= 2
