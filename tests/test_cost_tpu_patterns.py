"""Each TPU cost pattern of issue 18 on a real line of the golden v5p training step.

The lines, their fused bodies and XProf's figures come from ``../shared/corpus/traces/
tpu_v5_training_golden`` (docs/tpu_golden.md works each one through).  XProf's figures are per
TensorCore; the ops here were split over both cores of the megacore, so XProf shows half of what
profan counts for the whole op.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from profan.cost import CostModel, OpCost
from profan.cost.inflight import in_flight
from profan.hlo import Operand, parse_module
from profan.hlo.printer import instruction_to_text
from profan.xprof import ProfiledOp, op_for_line, op_module, read_op_profile
from tests.test_cost_tpu_golden import DEV_HALF, GOLDEN, GoldenOp, read_hlo_stats

BF16_2048x2048 = 2048 * 2048 * 2
MiB = 2**20


@pytest.fixture(scope="module")
def golden(corpus_dir: Path) -> dict[str, tuple[GoldenOp, object]]:
    profile = read_op_profile(corpus_dir / GOLDEN / "op_profile.expressions.json.gz")
    programs = {program.program_id: program for program in profile.programs}
    rows = read_hlo_stats(corpus_dir / GOLDEN / DEV_HALF)
    return {row.name: (row, programs[row.program_id]) for row in rows}


def _cost(golden, name: str) -> tuple[GoldenOp, OpCost, object]:
    row, program = golden[name]
    module = op_module(op_for_line(program, row.line), row.line)
    return row, CostModel(module).estimate(module.entry.root), module


def test_scanned_layer_reads_one_layer_of_the_stacked_weights(golden) -> None:
    # fusion.692: a convolution whose weights come from a nested fusion that dynamic-slices
    # layer i out of bf16[16,1,2048,2048] (128 MiB); XLA's FusionParameterReadBytes follows the
    # nested fusion to its dynamic-slice: one 8 MiB layer is read, not the stack
    _, cost, module = _cost(golden, "fusion.692")
    assert cost.hbm_bytes_read == BF16_2048x2048 + 2048 * 4  # the layer + its f32 norm scale
    assert cost.hbm_bytes_written == BF16_2048x2048  # the convolution's result
    assert cost.flops == pytest.approx(2 * 2048 * 2048 * 2048, rel=1e-3)
    stacked = [s for s in module.entry.root.operands if s.shape.dims == (16, 1, 2048, 2048)]
    assert stacked, "the stacked weights are an operand"


def test_scanned_layer_slice_in_a_loop_fusion_matches_xprof(golden) -> None:
    # fusion.619 slices the same stack directly: XProf's 16.8 MB per core is half of profan's
    row, cost, _ = _cost(golden, "fusion.619")
    assert cost.roofline_bytes == pytest.approx(2 * row.hbm_bytes, rel=0.01)


def test_collective_matmul_is_charged_its_convolution_only(golden) -> None:
    # fusion.728 carries an all-gather of bf16[1,512,16,128] (ending in an output aliased to an
    # operand) and 14 u32[]{:S(2)} sync flags through a convolution fusion: the fusion reads the
    # bf16[2048,7168] weights and writes the product; its S(1) operands are in VMEM
    row, cost, module = _cost(golden, "fusion.728")
    assert cost.hbm_bytes_read == 2048 * 7168 * 2
    assert cost.hbm_bytes_written == 2048 * 7168 * 2
    assert cost.hbm_bytes == pytest.approx(2 * row.hbm_bytes, rel=1e-6)
    op = module.entry.root
    passing = in_flight(op, module.computation("fused_computation.431"), CostModel(module))
    assert passing.collectives == ("all-gather.244",)
    assert {1, 2, 3} <= passing.outputs and {0, 1} <= passing.parameters


def test_async_collective_start_and_done_are_charged_in_full(golden) -> None:
    # the all-gather's own ops: start reads the shard S and writes (S, the full 4S), done reads
    # (S, 4S) and writes 4S: 6S and 9S, twice XProf's per-core figures
    shard = 512 * 7168 * 2
    start, start_cost, _ = _cost(golden, "async-collective-start.3")
    done, done_cost, _ = _cost(golden, "async-collective-done.3")
    assert start_cost.hbm_bytes == 6 * shard == pytest.approx(2 * start.hbm_bytes)
    assert done_cost.hbm_bytes == 9 * shard == pytest.approx(2 * done.hbm_bytes)
    assert start_cost.flops == done_cost.flops == 0.0


def test_splash_forward_reads_k_and_v_once_per_query_block(golden) -> None:
    name = next(n for n in golden if n.startswith("splash_mha_fwd"))
    row, cost, _ = _cost(golden, name)
    heads, seq, dim, blocks = 16, 2048, 128, 4  # block_q = block_kv = 512, from the name
    qkv = heads * seq * dim * 2
    per_position = seq * 128 * 4  # s32 [2048,128]: q segment ids, q positions (per head)
    kv_segments = 8 * seq * 4  # s32 [8,2048]: kv segment ids (per head and q block)
    read = qkv + 2 * blocks * qkv + 2 * heads * per_position
    read += heads * blocks * kv_segments + 2 * 16  # + the two s8[1,4,4] block masks
    assert cost.hbm_bytes_read == read
    assert cost.hbm_bytes_written == 3 * 512 * 128 * 4 + qkv + heads * seq * 128 * 4
    assert cost.hbm_bytes == pytest.approx(row.hbm_bytes, rel=0.10)  # XProf: 150.5 MB
    # FLOPs of a full block mask, an upper bound: the compiler folds the (operand) mask and
    # counts 12 of the 16 blocks
    assert cost.flops == 4 * heads * seq * seq * dim and cost.flops_source == "upper-bound"
    assert row.flops == pytest.approx(cost.flops * 12 / 16, rel=0.01)


def test_splash_dkv_rereads_q_and_do_once_per_key_block(golden) -> None:
    name = next(n for n in golden if "splash_mha_dkv" in n)
    row, cost, _ = _cost(golden, name)
    heads, seq, dim = 16, 2048, 128
    qkv = heads * seq * dim * 2
    assert cost.hbm_bytes_read > 4 * 2 * qkv  # Q and dO, four kv blocks each
    # the backward recomputes the scores: four matmuls per (q, k) pair
    assert cost.flops == 8 * heads * seq * seq * dim
    # XProf's figure is 764 TFLOP/s on one TensorCore: 3.3x its peak, not what ran
    assert row.flops / row.avg_time_s > 3 * 229.5e12


def test_prefetch_into_vmem_reads_hbm_on_the_start_and_writes_vmem_on_the_done(golden) -> None:
    start, start_cost, _ = _cost(golden, "copy-start.7")
    done, done_cost, _ = _cost(golden, "copy-done.7")
    assert start_cost.bytes_by_space == {"hbm": BF16_2048x2048}
    assert done_cost.bytes_by_space == {"hbm": 0, "vmem": BF16_2048x2048}  # into S(1)
    assert start_cost.hbm_bytes == pytest.approx(2 * start.hbm_bytes) and done.hbm_bytes == 0
    # XProf's all-space column: the same 8 MiB on each half (and the (dst, src, context) tuple's
    # 24-byte index table, which profan does not count)
    for row, cost in ((start, start_cost), (done, done_cost)):
        assert cost.all_space_bytes == pytest.approx(2 * row.all_space_bytes - 24, abs=1)
    assert not start_cost.host_transfer


def test_convolution_fusion_reads_its_vmem_operands_in_vmem(golden) -> None:
    # fusion.678's weights and norm scales were prefetched into S(1): the matmul reads them from
    # VMEM (XProf's all-space column counts them, its HBM column does not)
    row, cost, _ = _cost(golden, "fusion.678")
    vmem = 2048 * 7168 * 2 + BF16_2048x2048 + 2048 * 4 + 2048 * 2
    assert cost.bytes_by_space == {"hbm": 2048 * 7168 * 2, "vmem": vmem}
    assert cost.roofline_bytes == pytest.approx(2 * row.hbm_bytes, rel=1e-6)
    assert cost.all_space_bytes == pytest.approx(2 * row.all_space_bytes, rel=1e-6)


def test_sync_flags_and_smem_scalars_are_bytes_of_their_own_spaces(golden) -> None:
    # async-collective-start.3 writes the s32[2]{:S(4)} offsets and 12 u32[]{:S(2)} sync flags
    # its done reads; fusion.579 reads its layer index, an s32[] in S(6).  XProf's all-space
    # column is their bytes above its HBM column (per TensorCore: half)
    for name, spaces in (
        ("async-collective-start.3", {"S(2)": 12 * 4, "S(4)": 2 * 4}),
        ("async-collective-done.3", {"S(2)": 12 * 4, "S(4)": 2 * 4}),
        ("fusion.579", {"S(6)": 4}),
    ):
        row, cost, _ = _cost(golden, name)
        assert {k: v for k, v in cost.bytes_by_space.items() if k != "hbm"} == spaces, name
        elsewhere = 2 * (row.all_space_bytes - row.hbm_bytes)
        assert elsewhere == pytest.approx(sum(spaces.values()), abs=1), name


def test_async_collective_done_fusion_is_the_wait_of_an_async_pair(golden) -> None:
    # its AsyncCollectiveDone marker call: the done's event is the wait (1.5 us for 66 MB of
    # output), so a rate over its event says nothing; the start's event does the collective's
    # local part (105 us for its 44 MB) and stays an op of its own
    start_row, start, _ = _cost(golden, "async-collective-start.3")
    row, done, _ = _cost(golden, "async-collective-done.4")
    assert (start.async_role, done.async_role) == (None, "done")
    assert row.avg_time_s < 2e-6 and start_row.avg_time_s > 100e-6


def test_in_place_dynamic_update_slice_moves_only_its_update(golden) -> None:
    row, cost, _ = _cost(golden, "dynamic-update-slice.32")
    update = 512 * 7168 * 4  # f32[1,512,7168] into f32[16,512,7168]
    assert cost.hbm_bytes_read == update  # its start index lives in S(6) (SMEM): no HBM byte
    assert cost.hbm_bytes_written == update
    assert cost.hbm_bytes == pytest.approx(2 * row.hbm_bytes, rel=1e-6)


def test_rng_bit_generator_counts_elements_not_tile_padding(golden) -> None:
    # u32[10,4]{0,1:T(4,128)} occupies 2 KiB of (4,128) tiles; the compiler charges its 160 B
    row, cost, _ = _cost(golden, "rng-bit-generator")
    assert cost.hbm_bytes == 160 + 16 == 2 * row.hbm_bytes
    assert cost.transcendentals == 40 and cost.flops == 0 == row.flops


def test_megacore_fusion_gets_its_body_from_its_in_megacore_ops(golden) -> None:
    # fusion.606 calls %megacore_fusion.2.clone, which the op profile does not list: its ops
    # are fusion.19.in_megacore_fusion.1 and fusion.164.in_megacore_fusion.1 (%para.22-25)
    row, cost, module = _cost(golden, "fusion.606")
    body = module.computation("megacore_fusion.2.clone")
    names = {i.name for i in body.instructions if i.opcode == "fusion"}
    assert names == {"fusion.19.in_megacore_fusion.1", "fusion.164.in_megacore_fusion.1"}
    assert cost.flops == pytest.approx(2 * row.flops, rel=0.01)
    assert cost.hbm_bytes == pytest.approx(2 * row.hbm_bytes, rel=0.01)


def test_a_while_alone_has_its_own_figures_not_its_bodys(fixtures_dir: Path) -> None:
    dump = "module_0018.jit_forward.cpu_after_optimizations.txt"
    path = fixtures_dir / "scan_layers" / "hlo" / dump
    module = parse_module(path.read_text(), file=str(path))
    loop = next(i for i in module.instructions() if i.opcode == "while")
    with_body = CostModel(module).estimate(loop)
    assert with_body.flops > 0  # XLA's convention in a module: its body, once
    # as XProf prints it: the operands' shapes in the line, no body
    state = [Operand(o.name, module.entry.get(o.name).shape) for o in loop.operands]
    line = instruction_to_text(replace(loop, operands=state))
    alone = op_module(ProfiledOp(loop.name, line, "while"))
    cost = CostModel(alone).estimate(alone.entry.root)
    assert cost.flops == 0 and cost.flops_source == "hlo"
    assert cost.hbm_bytes == 2 * 3 * 8  # the (s32, f32, f32) state's pointer tables, in place
