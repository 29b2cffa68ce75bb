"""The splash attention kernels' HBM traffic against a walk of their Pallas grids.

``profan.cost.kernels.blocked`` counts a splash kernel's traffic with closed forms (K and V once
per q block, ...).  Here each kernel's grid is walked step by step instead, with the BlockSpecs
of JAX's ``splash_attention_kernel.py`` (the version whose kernel names carry the block sizes, as
the golden v5p profile's do): for every operand and result, the block index its index map gives
at each step; Pallas DMAs a block in when the index differs from the previous step's and writes
an output block back when its index is about to change (and after the last step).  A full block
mask (``data_next`` maps step j to block j) is what profan assumes.  The forward and dKV lines are
the golden's; no dQ kernel is in its dev half, so its line here is synthetic, built from the dKV
line's operands in the order JAX's ``_splash_attention_bwd_dq`` passes them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from profan.cost import CostModel
from profan.hlo import parse_module
from profan.xprof import op_for_line, op_module, read_op_profile
from tests.test_cost_tpu_golden import DEV_HALF, GOLDEN, read_hlo_stats

HEADS, SEQ, DIM, BLOCK = 16, 2048, 128, 512
BLOCKS = SEQ // BLOCK
LANES, SUBLANES = 128, 8
Index = Callable[[int, int, int], tuple[int, ...]]


@dataclass(frozen=True)
class Spec:
    """One operand's or result's BlockSpec: the bytes of a block and its index map."""

    name: str
    block_bytes: int
    index: Index


def _runs(grid: tuple[int, int, int], index: Index) -> int:
    """How many times the block index changes along the grid (row-major), the first included:
    the DMAs of an input, the write-backs of an output."""
    runs, previous = 0, None
    for step in itertools.product(*(range(n) for n in grid)):
        current = index(*step)
        if current != previous:
            runs += 1
        previous = current
    return runs


def _walk(grid: tuple[int, int, int], specs: list[Spec]) -> int:
    return sum(_runs(grid, spec.index) * spec.block_bytes for spec in specs)


BF16_BLOCK = BLOCK * DIM * 2
F32_BLOCK = BLOCK * DIM * 4
MASKS = 2 * BLOCKS * BLOCKS  # the two s8[1,4,4] scalar-prefetch operands, read once

# forward and dQ: grid (heads h, q blocks i, kv blocks j), the same maps for what both read
BY_HEAD_Q_KV = [
    Spec("q", BF16_BLOCK, lambda h, i, j: (h, i)),
    Spec("k", BF16_BLOCK, lambda h, i, j: (h, j)),
    Spec("v", BF16_BLOCK, lambda h, i, j: (h, j)),
    Spec("q_segment_ids (bq, 128)", BLOCK * LANES * 4, lambda h, i, j: (i,)),
    Spec("kv_segment_ids (8, bkv)", SUBLANES * BLOCK * 4, lambda h, i, j: (j,)),
    Spec("q_sequence (bq, 128)", BLOCK * LANES * 4, lambda h, i, j: (i,)),
]
FWD_IN = BY_HEAD_Q_KV
FWD_OUT = [
    Spec("m_scratch", BLOCK * LANES * 4, lambda h, i, j: (0,)),
    Spec("l_scratch", BLOCK * LANES * 4, lambda h, i, j: (0,)),
    Spec("o_scratch", F32_BLOCK, lambda h, i, j: (0,)),
    Spec("o", BF16_BLOCK, lambda h, i, j: (h, i)),
    Spec("logsumexp (bq, 128)", BLOCK * LANES * 4, lambda h, i, j: (h, i)),
]
# dKV: grid (kv blocks kv, heads h, q blocks q)
DKV_IN = [
    Spec("q", BF16_BLOCK, lambda kv, h, q: (h, q)),
    Spec("k", BF16_BLOCK, lambda kv, h, q: (h, kv)),
    Spec("v", BF16_BLOCK, lambda kv, h, q: (h, kv)),
    Spec("q_segment_ids (8, bq)", SUBLANES * BLOCK * 4, lambda kv, h, q: (q,)),
    Spec("kv_segment_ids (bkv, 128)", BLOCK * LANES * 4, lambda kv, h, q: (kv,)),
    Spec("logsumexp (8, bq)", SUBLANES * BLOCK * 4, lambda kv, h, q: (h, q)),
    Spec("do", BF16_BLOCK, lambda kv, h, q: (h, q)),
    Spec("di (8, bq)", SUBLANES * BLOCK * 4, lambda kv, h, q: (h, q)),
    Spec("q_sequence (8, bq)", SUBLANES * BLOCK * 4, lambda kv, h, q: (q,)),
]
DKV_OUT = [
    Spec("dk_scratch", F32_BLOCK, lambda kv, h, q: (0,)),
    Spec("dv_scratch", F32_BLOCK, lambda kv, h, q: (0,)),
    Spec("dk", BF16_BLOCK, lambda kv, h, q: (h, kv)),
    Spec("dv", BF16_BLOCK, lambda kv, h, q: (h, kv)),
]
# dQ also reads logsumexp and di, [heads, 1, q_len], and dO
DQ_IN = [
    *BY_HEAD_Q_KV,
    Spec("logsumexp (1, bq)", BLOCK * 4, lambda h, i, j: (h, i)),
    Spec("do", BF16_BLOCK, lambda h, i, j: (h, i)),
    Spec("di (1, bq)", BLOCK * 4, lambda h, i, j: (h, i)),
]
DQ_OUT = [
    Spec("dq_scratch", F32_BLOCK, lambda h, i, j: (0,)),
    Spec("dq", BF16_BLOCK, lambda h, i, j: (h, i)),
]
GRID_FWD = GRID_DQ = (HEADS, BLOCKS, BLOCKS)
GRID_DKV = (BLOCKS, HEADS, BLOCKS)

T = "{2,1,0:T(8,128)(2,1)}"  # the layouts the golden prints
SYNTHETIC_DQ_LINE = (
    "%vmap_splash_mha_dq_segmented_block_kv_dq_512_block_q_dq_512_k_layout_1_q_layout_1_"
    f"v_layout_1_ = (f32[512,128]{{1,0:T(8,128)}}, bf16[16,2048,128]{T}) custom-call("
    "s8[1,4,4]{2,1,0:T(4,128)(4,1)} %data_next, s8[1,4,4]{2,1,0:T(4,128)(4,1)} %block_mask, "
    f"bf16[16,2048,128]{T} %q, bf16[16,2048,128]{T} %k, bf16[16,2048,128]{T} %v, "
    "s32[2048,128]{1,0:T(8,128)} %q_segment_ids, s32[8,2048]{1,0:T(8,128)} %kv_segment_ids, "
    "f32[16,1,2048]{2,1,0:T(1,128)} %logsumexp, "
    f"bf16[16,2048,128]{T} %do, f32[16,1,2048]{{2,1,0:T(1,128)}} %di, "
    '''s32[2048,128]{1,0:T(8,128)} %q_sequence), custom_call_target="tpu_custom_call"'''
)


def _golden_cost(corpus_dir: Path, phase: str):
    profile = read_op_profile(corpus_dir / GOLDEN / "op_profile.expressions.json.gz")
    programs = {program.program_id: program for program in profile.programs}
    rows = read_hlo_stats(corpus_dir / GOLDEN / DEV_HALF)
    row = next(r for r in rows if f"splash_mha_{phase}" in r.name)
    module = op_module(op_for_line(programs[row.program_id], row.line), row.line)
    return row, CostModel(module).estimate(module.entry.root)


def test_forward_schedule(corpus_dir: Path) -> None:
    row, cost = _golden_cost(corpus_dir, "fwd")
    assert cost.hbm_bytes_read == _walk(GRID_FWD, FWD_IN) + MASKS
    assert cost.hbm_bytes_written == _walk(GRID_FWD, FWD_OUT)
    # 139.2 MB; XProf's HBM column says 150.5 MB for this call (142.1 MB for the other)
    assert cost.hbm_bytes == pytest.approx(row.hbm_bytes, rel=0.10)


def test_dkv_schedule_and_its_ceiling(corpus_dir: Path) -> None:
    row, cost = _golden_cost(corpus_dir, "dkv")
    assert cost.hbm_bytes_read == _walk(GRID_DKV, DKV_IN) + MASKS
    assert cost.hbm_bytes_written == _walk(GRID_DKV, DKV_OUT)
    assert cost.hbm_bytes == 119_013_408  # 113.5 MiB
    # even a block of every operand and result on every one of the 256 steps (no block kept
    # from one step to the next) moves less than half of XProf's HBM figure
    steps = BLOCKS * HEADS * BLOCKS
    ceiling = steps * sum(spec.block_bytes for spec in DKV_IN + DKV_OUT) + MASKS
    assert ceiling == 419_430_432
    assert ceiling < 0.52 * row.hbm_bytes  # XProf: 814 MB per TensorCore


def test_dq_schedule_on_a_synthetic_line() -> None:
    module = parse_module(
        "HloModule synthetic_splash_dq\n\nENTRY %main () -> (f32[512,128], bf16[16,2048,128]) {\n"
        + "\n".join(
            f"  %{name} = {shape} parameter({n})"
            for n, (name, shape) in enumerate(
                [
                    ("data_next", "s8[1,4,4]{2,1,0:T(4,128)(4,1)}"),
                    ("block_mask", "s8[1,4,4]{2,1,0:T(4,128)(4,1)}"),
                    ("q", f"bf16[16,2048,128]{T}"),
                    ("k", f"bf16[16,2048,128]{T}"),
                    ("v", f"bf16[16,2048,128]{T}"),
                    ("q_segment_ids", "s32[2048,128]{1,0:T(8,128)}"),
                    ("kv_segment_ids", "s32[8,2048]{1,0:T(8,128)}"),
                    ("logsumexp", "f32[16,1,2048]{2,1,0:T(1,128)}"),
                    ("do", f"bf16[16,2048,128]{T}"),
                    ("di", "f32[16,1,2048]{2,1,0:T(1,128)}"),
                    ("q_sequence", "s32[2048,128]{1,0:T(8,128)}"),
                ]
            )
        )
        + f"\n  ROOT {SYNTHETIC_DQ_LINE}\n}}\n"
    )
    cost = CostModel(module).estimate(module.entry.root)
    assert cost.hbm_bytes_read == _walk(GRID_DQ, DQ_IN) + MASKS
    assert cost.hbm_bytes_written == _walk(GRID_DQ, DQ_OUT)
    assert cost.hbm_bytes == pytest.approx(130.5e6, rel=0.001)  # 124.5 MiB
    # dQ recomputes the scores: three matmuls per (q, k) pair (QK^T, dO V^T, dS K)
    assert cost.flops == 6 * HEADS * SEQ * SEQ * DIM
