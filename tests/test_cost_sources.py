"""Every op's FLOPs and bytes say where they come from (``flops_source``, ``bytes_source``), and a
figure profan cannot know is unknown, never a silent 0."""

from __future__ import annotations

from pathlib import Path

from profan.cost import CostModel, estimate
from profan.hlo.parser import parse_instruction, parse_module
from profan.hlo.shapes import is_unknown
from tests.conftest import FIXTURES_DIR


def test_ops_of_a_real_module_are_costed_from_the_hlo() -> None:
    (dump,) = (FIXTURES_DIR / "matmul" / "hlo").glob("*after_optimizations.txt")
    module = parse_module(dump.read_text(), file=str(dump))
    model = CostModel(module)
    costs = [model.estimate(i) for i in module.instructions()]
    assert {(c.flops_source, c.bytes_source) for c in costs} == {("hlo", "hlo")}


def test_a_pasted_fusion_line_has_unknown_flops_and_upper_bound_bytes() -> None:
    cost = estimate(parse_instruction("%f = f32[8]{0} fusion(f32[8]{0} %x), kind=kLoop, calls=%b"))
    assert cost.flops is None and cost.flops_source == "unknown"
    assert cost.hbm_bytes == 64 and cost.bytes_source == "upper-bound"


def test_elided_operands_make_bytes_a_lower_bound() -> None:
    cost = estimate(parse_instruction("%f = f32[8]{0} fusion(...), kind=kLoop, calls=%b"))
    assert cost.bytes_source == "lower-bound" and cost.hbm_bytes == 32  # the result only


def test_a_line_whose_shape_cannot_be_inferred_costs_unknown_not_zero() -> None:
    # operands named but not shown: nothing to infer the result's shape from
    line = parse_instruction("%a = add(%x, %y)")
    assert is_unknown(line.shape)
    cost = estimate(line)
    assert cost.flops is None and cost.unknown and cost.flops_source == "unknown"
    assert cost.bytes_source == "lower-bound" and cost.hbm_bytes == 0


def test_a_shape_the_text_left_out_makes_the_cost_unknown() -> None:
    # A call printed without its shape, whose callee comes after it (XLA wants callees first, so
    # nothing defines the call's shape when it is read): the call's cost is unknown, its known
    # operand counted as a lower bound.
    module = parse_module(
        "HloModule synthetic_unknown_shape\n\n"
        "ENTRY %main {\n"
        "  %p = (s32[], f32[]) parameter(0)\n"
        "  ROOT %c = call(%p), to_apply=%body_later\n}\n\n"
        "%body_later {\n"
        "  %q = (s32[], f32[]) parameter(0)\n"
        "  %a = s32[] get-tuple-element(%q), index=0\n"
        "  %b = f32[] get-tuple-element(%q), index=1\n"
        "  ROOT %t = (s32[], f32[]) tuple(%a, %b)\n}\n"
    )
    call = module.entry.root
    assert is_unknown(call.shape)
    cost = CostModel(module).estimate(call)
    assert cost.flops is None and cost.unknown and cost.flops_source == "unknown"
    assert cost.hbm_bytes == 8 * 2 and cost.bytes_source == "lower-bound"  # the operand's table


def test_a_conditional_with_an_uncostable_branch_is_unknown_not_zero(corpus_dir: Path) -> None:
    # both branches are custom calls with no model: the costliest branch is unknown, so is the
    # conditional (it used to be 0 FLOPs)
    path = corpus_dir / "hlo" / "xla" / "xla__backends__gpu__transforms__async_wrapper_test__2.hlo"
    module = parse_module(path.read_text(), file=str(path))
    cost = CostModel(module).estimate(module.entry.root)
    assert module.entry.root.opcode == "conditional"
    assert cost.flops is None and cost.flops_source == "unknown" and cost.unknown


def test_sums_keep_the_weakest_source() -> None:
    module = parse_module(
        "HloModule synthetic_sources\n\n"
        "%body (p: f32[8]) -> f32[8] {\n"
        "  %p = f32[8]{0} parameter(0)\n"
        '  %k = f32[8]{0} custom-call(%p), custom_call_target="no_model_for_this"\n'
        "  ROOT %a = f32[8]{0} add(%k, %p)\n}\n\n"
        "ENTRY %main (x: f32[8]) -> f32[8] {\n"
        "  %x = f32[8]{0} parameter(0)\n"
        "  ROOT %c = f32[8]{0} call(%x), to_apply=%body\n}\n"
    )
    model = CostModel(module)
    kernel = model.estimate(module.computation("body").get("k"))
    assert kernel.flops_source == "unknown" and kernel.bytes_source == "lower-bound"
    call = model.estimate(module.entry.root)
    assert call.flops is None and call.flops_source == "unknown"
    assert call.bytes_source == "lower-bound"  # add's hlo bytes + the kernel's lower bound
