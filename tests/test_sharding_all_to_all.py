"""All-to-all moves a split from one dim to another (issue 5: sharding through all-to-all).

The two shard_map programs are committed fixtures that XLA printed (jax/jaxlib 0.10.2, CPU,
forced host devices): ``fixtures/all_to_all/<program>/``, made by ``fixtures/make_fixtures.py
all_to_all``; their ``meta.json`` holds the JAX program, mesh and the global-shape truth.
XLA's CPU backend writes the array all-to-all of ``jax.lax.all_to_all`` as a tuple all-to-all
of equal slices, reassembled by a concatenate, so the array form (``dimensions={k}``, as
TPU/GPU programs print it) is covered by a synthetic module. The hand-derived numbers below
are also checked against each fixture's meta truth.
"""

from __future__ import annotations

import json
import math
from typing import Any

from profan.hlo.parser import parse_module
from profan.sharding import MatmulSharding, describe
from tests.conftest import FIXTURES_DIR

ALL_TO_ALL = FIXTURES_DIR / "all_to_all"


def _fixture(program: str) -> tuple[str, dict[str, Any]]:
    """The dump text and meta of fixtures/all_to_all/<program>/."""
    folder = ALL_TO_ALL / program
    meta = json.loads((folder / "meta.json").read_text())
    (entry,) = meta["hlo_files"]
    return (folder / entry["file"]).read_text(), meta


# mesh ('x',) of 4 devices; a: f32[16,32] split P('x', None); w: f32[16,8] replicated;
# b = shard_map(lambda a: all_to_all(a, 'x', split_axis=1, concat_axis=0, tiled=True),
#               in_specs=P('x', None), out_specs=P(None, 'x'))(a)   -> b: [16,32] split on dim 1
# out = b.T @ w   -> global [32,16] x [16,8] -> [32,8], contracting 16, out split on dim 0.
ROWS_TO_COLS, ROWS_TO_COLS_META = _fixture("all_to_all_rows")

# mesh ('x', 'y') = (2, 4); a: f32[64,32] split P('x', 'y'); w: f32[32,8] replicated;
# b = shard_map(lambda a: all_to_all(a, 'y', split_axis=0, concat_axis=1, tiled=True),
#               in_specs=P('x', 'y'), out_specs=P(('x', 'y'), None))(a) -> b: [64,32], dim 0
#               split over both axes
# out = b @ w   -> global [64,32] x [32,8] -> [64,8], contracting 32.
COLS_TO_ROWS_2D, COLS_TO_ROWS_2D_META = _fixture("all_to_all_2d")


def _only_matmul(text: str) -> MatmulSharding:
    report = describe(parse_module(text, file="<fixture>"))
    assert len(report.matmuls) == 1
    return report.matmuls[0]


def _assert_matches_truth(dot: MatmulSharding, meta: dict[str, Any]) -> None:
    """The dot against the generator's truth (global einsum, local shapes, split axes)."""
    (truth,) = meta["truth"]["matmuls"]
    assert dot.local_out == truth["out_local_shape"]
    assert math.prod(dot.global_lhs) == math.prod(truth["lhs_shape"])
    assert math.prod(dot.global_out) == math.prod(truth["out_shape"])
    assert dot.global_flops == 2 * math.prod(truth["dim_sizes"].values())
    assert len({a for axes in dot.out_split.values() for a in axes}) == len(
        {a for axes in truth["out_split"].values() for a in axes}
    )
    assert dot.partial_sum_axes == truth["partial_sum_axes"]


def test_fsdp_dw1_gets_its_split_through_the_tuple_all_to_all() -> None:
    """dw1 = x^T @ dy: x reaches the dot through a tuple all-to-all of eight [4,1,8] pieces."""
    meta = json.loads((FIXTURES_DIR / "fsdp" / "meta.json").read_text())
    path = next((FIXTURES_DIR / "fsdp" / "hlo").glob("*after_optimizations.txt"))
    report = describe(parse_module(path.read_text(), file=str(path)))
    truth = next(t for t in meta["truth"]["matmuls"] if t["name"] == "w1.grad_rhs")
    ours = [m for m in report.matmuls if m.local_lhs == truth["lhs_local_shape"]]
    assert len(ours) == 1
    dot = ours[0]
    assert dot.local_out == truth["out_local_shape"]
    assert dot.global_lhs == truth["lhs_shape"]
    assert dot.global_out == truth["out_shape"]
    assert sorted(dot.lhs_split) == sorted(int(k) for k in truth["lhs_split"])
    assert sorted(dot.out_split) == sorted(int(k) for k in truth["out_split"])
    # The one mesh axis (whatever profan calls it) splits both.
    assert len({a for axes in dot.lhs_split.values() for a in axes}) == 1


def test_all_to_all_fixtures_are_the_programs_described() -> None:
    """The meta's truth matches the dumps: mesh, parameter shardings and the all-to-all group."""
    for text, meta, local, groups in (
        (ROWS_TO_COLS, ROWS_TO_COLS_META, "f32[4,32]", "{{0,1,2,3}}"),
        (COLS_TO_ROWS_2D, COLS_TO_ROWS_2D_META, "f32[32,8]", "{{0,1,2,3},{4,5,6,7}}"),
    ):
        a2a = meta["truth"]["all_to_all"]
        assert a2a["tiled"] and meta["inputs"][0]["shape"] == a2a["shape"]
        sizes = dict(zip(meta["mesh"]["axis_names"], meta["mesh"]["axis_sizes"], strict=True))
        assert f"num_partitions={math.prod(sizes.values())}" in text.split("\n", 1)[0]
        assert f"%param.1 = {local}{{1,0}} parameter(0)" in text
        (coll,) = meta["hlo_collectives"]
        assert (coll["opcode"], coll["groups"]) == ("all-to-all", f"replica_groups={groups}")


def test_tuple_all_to_all_rows_to_cols_recovers_the_global_matmul() -> None:
    dot = _only_matmul(ROWS_TO_COLS)
    _assert_matches_truth(dot, ROWS_TO_COLS_META)
    assert dot.local_lhs == [16, 8] and dot.local_out == [8, 8]
    assert math.prod(dot.global_lhs) == 16 * 32
    assert math.prod(dot.global_out) == 32 * 8
    assert dot.global_flops == 2 * 32 * 8 * 16
    assert dot.global_flops == dot.local_flops * 4  # 4 devices, no replicated work
    assert {a for axes in dot.out_split.values() for a in axes} == {
        a for axes in dot.lhs_split.values() for a in axes
    }
    assert dot.partial_sum_axes == []  # the contracted dim (16) is whole on every device


def test_tuple_all_to_all_over_one_axis_of_two() -> None:
    """The group is one mesh axis ('y'); the other ('x') keeps splitting the same dim."""
    dot = _only_matmul(COLS_TO_ROWS_2D)
    _assert_matches_truth(dot, COLS_TO_ROWS_2D_META)
    assert dot.local_lhs == [8, 32] and dot.local_out == [8, 8]
    assert math.prod(dot.global_lhs) == 64 * 32
    assert math.prod(dot.global_out) == 64 * 8
    assert dot.global_flops == 2 * 64 * 8 * 32
    out_axes = {a for axes in dot.out_split.values() for a in axes}
    assert len(out_axes) == 2  # split over both mesh axes, 8 ways
    assert dot.partial_sum_axes == []


def test_all_to_all_pieces_out_of_order_stay_unknown_synthetic() -> None:
    """Synthetic: the same module with the pieces sent in a shuffled order. Piece i no longer
    goes to member i, so nothing says which part each device holds: no split is invented."""
    shuffled = ROWS_TO_COLS.replace(
        "all-to-all(%wrapped_slice, %wrapped_slice.1, %wrapped_slice.2, %wrapped_slice.3)",
        "all-to-all(%wrapped_slice.1, %wrapped_slice, %wrapped_slice.2, %wrapped_slice.3)",
    )
    assert shuffled != ROWS_TO_COLS
    dot = _only_matmul(shuffled)
    assert dot.global_out == dot.local_out
    assert dot.global_flops == dot.local_flops


ARRAY_FORM_SYNTHETIC = """HloModule synthetic_array_all_to_all, num_partitions=4

ENTRY %main (p: f32[8,16], w: f32[32,8]) -> f32[4,8] {
  %p = f32[8,16]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}
  %w = f32[32,8]{1,0} parameter(1), sharding={replicated}
  %a2a = f32[8,16]{1,0} all-to-all(%p), channel_id=1, replica_groups={{0,1,2,3}}, dimensions={1}
  %r = f32[8,4,4]{2,1,0} reshape(%a2a)
  %t = f32[4,8,4]{2,1,0} transpose(%r), dimensions={1,0,2}
  %m = f32[32,4]{1,0} reshape(%t)
  ROOT %dot = f32[4,8]{1,0} dot(%m, %w), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}
"""


def test_array_all_to_all_moves_the_split_synthetic() -> None:
    """Synthetic array form: p is global [32,16] split on rows; after the all-to-all along
    dim 1 each device holds all 32 rows (as [member, row] blocks) and a quarter of the
    columns, so m^T @ w is global [16,32] x [32,8] -> [16,8]."""
    dot = _only_matmul(ARRAY_FORM_SYNTHETIC)
    assert math.prod(dot.global_lhs) == 32 * 16
    assert math.prod(dot.global_out) == 16 * 8
    assert dot.global_flops == 2 * 16 * 8 * 32
    assert dot.partial_sum_axes == []


def test_array_all_to_all_without_a_known_split_stays_unknown_synthetic() -> None:
    """Synthetic: the same module without the parameter's sharding: nothing to move."""
    text = ARRAY_FORM_SYNTHETIC.replace(", sharding={devices=[4,1]<=[4]}", "")
    dot = _only_matmul(text)
    assert dot.global_out == dot.local_out


def test_fsdp_split_feature_dim_of_a_gradient_is_not_sequence_parallel() -> None:
    """dw1's lhs is x^T: its split free dim (after the all-to-all) is a feature, not tokens.
    The fixture's forward matmuls are all rank-2 [batch, feature] (no sequence dim)."""
    meta = json.loads((FIXTURES_DIR / "fsdp" / "meta.json").read_text())
    forward = [t for t in meta["truth"]["matmuls"] if t["pass"] == "forward"]
    assert forward and all(len(t["lhs_shape"]) == 2 for t in forward)
    path = next((FIXTURES_DIR / "fsdp" / "hlo").glob("*after_optimizations.txt"))
    labels = {s.strategy for s in describe(parse_module(path.read_text())).strategies}
    assert "sequence/context parallel" not in labels
    assert "FSDP/ZeRO" in labels
