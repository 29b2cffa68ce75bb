"""The cost model on XLA's HLO test modules: never crashes; real dots obey the einsum formula."""

from __future__ import annotations

import json
from pathlib import Path

from profan.cost import CostModel
from profan.cost.flops import einsum_flops
from profan.hlo.parser import parse_module
from profan.hlo.views import int_list_attribute
from profan.roofline import score_module


def _sample(corpus_dir: Path, every: int) -> list[Path]:
    root = corpus_dir / "hlo" / "xla"
    rows = [json.loads(line) for line in (root / "MANIFEST.jsonl").read_text().splitlines()]
    files = [root / row["file"] for row in rows if row.get("xla_parses")]
    return files[::every]


def test_every_instruction_costs_without_error_and_dots_match_einsum(corpus_dir: Path) -> None:
    dots_checked = 0
    instructions = 0
    for path in _sample(corpus_dir, every=15):
        try:
            module = parse_module(path.read_text(), file=str(path))
        except Exception:  # the parser's business, tested elsewhere
            continue
        model = CostModel(module)
        for instruction in module.instructions():
            cost = model.estimate(instruction)  # must not raise
            instructions += 1
            if instruction.opcode != "dot" or cost.flops is None:
                continue
            lhs, rhs = (model.operand_shape(instruction, i) for i in (0, 1))
            if lhs is None or rhs is None or not lhs.is_array or not rhs.is_array:
                continue
            expected = einsum_flops(
                lhs,
                rhs,
                int_list_attribute(instruction, "lhs_batch_dims"),
                int_list_attribute(instruction, "lhs_contracting_dims"),
                int_list_attribute(instruction, "rhs_batch_dims"),
                int_list_attribute(instruction, "rhs_contracting_dims"),
            )
            assert cost.flops == expected, f"{path.name}: {instruction.name}"
            dots_checked += 1
        score_module(module, "tpu-v5e")  # must not raise either
    assert instructions > 2000 and dots_checked > 20


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
