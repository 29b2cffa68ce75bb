"""The cost model on every XLA HLO test module: never crashes, every figure has a source, unknown
shapes are unknown costs, real dots obey the einsum formula."""

from __future__ import annotations

import json
import math
from pathlib import Path

from profan.cost import CostModel
from profan.cost.flops import einsum_flops
from profan.cost.kernels import SOURCES
from profan.hlo.model import Instruction, Shape
from profan.hlo.opcodes import FREE_OPCODES
from profan.hlo.parser import parse_module
from profan.hlo.shapes import is_unknown
from profan.hlo.views import int_list_attribute
from profan.roofline import score_module
from tests.test_hlo_verify import VERIFIER_REJECTS


def _parseable(corpus_dir: Path) -> list[Path]:
    """Every corpus module XLA's own parser accepts (the manifest says which) but the few its
    shape inference refuses, which profan's verifier refuses too (``VERIFIER_REJECTS``)."""
    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    return [
        root / row["file"]
        for row in rows
        if row.get("xla_parses") and row["file"] not in VERIFIER_REJECTS
    ]


def _einsum(instruction: Instruction, lhs: Shape, rhs: Shape) -> int:
    return einsum_flops(
        lhs,
        rhs,
        int_list_attribute(instruction, "lhs_batch_dims"),
        int_list_attribute(instruction, "lhs_contracting_dims"),
        int_list_attribute(instruction, "rhs_batch_dims"),
        int_list_attribute(instruction, "rhs_contracting_dims"),
    )


def test_every_corpus_instruction_is_costed_with_its_source(corpus_dir: Path) -> None:
    """Over every module XLA accepts: costing never raises; every figure names a known source;
    an instruction with a shape the text left out (and profan could not infer) is unknown, never
    a silent 0; every dot obeys the einsum formula; compile-time scoring runs on every module."""
    modules = instructions = dots = unknown_shapes = 0
    inconsistent: list[str] = []
    for path in _parseable(corpus_dir):
        module = parse_module(path.read_text(), file=str(path))
        modules += 1
        model = CostModel(module)
        for instruction in module.instructions():
            cost = model.estimate(instruction)
            instructions += 1
            where = f"{path.name}: {instruction.name}"
            assert cost.flops_source in SOURCES and cost.bytes_source in SOURCES, where
            assert (cost.flops is None) == (cost.flops_source == "unknown"), where
            shapes = [instruction.shape, *model.operand_shapes(instruction)]
            if instruction.opcode not in FREE_OPCODES and any(map(is_unknown, shapes)):
                unknown_shapes += 1
                assert cost.flops is None and cost.unknown, where
                assert cost.bytes_source == "lower-bound", where
                continue
            if instruction.opcode != "dot":
                continue
            lhs, rhs = (model.operand_shape(instruction, i) for i in (0, 1))
            assert lhs is not None and rhs is not None and cost.flops is not None, where
            contracting = math.prod(
                lhs.dims[d] for d in int_list_attribute(instruction, "lhs_contracting_dims")
            )
            if 2 * instruction.shape.num_elements * contracting != _einsum(instruction, lhs, rhs):
                # the printed result shape contradicts the operands (XLA's parser does not check
                # it): profan counts the printed shape, as XLA's cost analysis does
                inconsistent.append(where)
                continue
            assert cost.flops == _einsum(instruction, lhs, rhs), where
            dots += 1
        score_module(module, "tpu-v5e")  # must not raise either
    # (XLA infers every shape the text leaves out; so does profan's parser, or it marks the
    # shape unknown and the cost says so: test_cost_sources covers such a line.)
    assert modules > 4400 and instructions > 150_000 and dots > 1000
    assert len(inconsistent) <= 3, inconsistent


def test_a_dot_printed_without_its_shape_is_inferred_not_zero(corpus_dir: Path) -> None:
    # `dot = dot(lhs, b)` prints no shape; XLA infers f32[...] from the operands, so does profan
    name = "xla__service__while_loop_expensive_invariant_code_motion_test__0.hlo"
    path = corpus_dir / "hlo" / "xla" / name
    module = parse_module(path.read_text(), file=str(path))
    model = CostModel(module)
    (dot,) = [i for i in module.instructions() if i.opcode == "dot"]
    lhs, rhs = (model.operand_shape(dot, i) for i in (0, 1))
    assert lhs is not None and rhs is not None
    cost = model.estimate(dot)
    assert cost.flops == _einsum(dot, lhs, rhs) > 0 and cost.flops_source == "hlo"


def test_cudnn_fused_attention_forward_flops(corpus_dir: Path) -> None:
    # XLA's own GPU test module: softmax(Q K^T) V with B=4, H=4, S=1024, D=64
    path = corpus_dir / "hlo" / "xla" / "xla__backends__gpu__tests__gpu_fused_mha_test__23.hlo"
    module = parse_module(path.read_text(), file=str(path))
    model = CostModel(module)
    calls = [i for i in module.instructions() if i.opcode == "custom-call"]
    fmha = next(i for i in calls if "fmhaSoftmax" in i.attributes.get("custom_call_target", ""))
    cost = model.estimate(fmha)
    batch, heads, seq, head_dim = 4, 4, 1024, 64
    assert cost.flops == 4 * batch * heads * seq * seq * head_dim  # two matmuls of 2*B*H*S*S*D
    assert cost.transcendentals == batch * heads * seq * seq
    assert not cost.unknown
