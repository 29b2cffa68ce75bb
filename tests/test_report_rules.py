"""Suspicious-op rules on real HLO (fixtures printed by XLA on CPU, XLA's own test modules)."""

from __future__ import annotations

from pathlib import Path

import pytest

from profan.cost.bytes import padding_ratio
from profan.hlo.opcodes import collective_kind
from profan.hlo.parser import parse_module
from profan.hlo.views import called_computations
from profan.report.model import ChipSection, Device, OpEntry, Report, Summary
from profan.report.rules import catalogue as rules
from profan.report.rules import hlo_checks
from profan.report.rules.catalogue import OpContext
from profan.report.rules.config import RuleConfig


def _module(path: Path):
    return parse_module(path.read_text(), file=str(path))


def _fixture_module(fixtures_dir: Path, name: str):
    files = sorted((fixtures_dir / name / "hlo").glob("module_*after_optimizations.txt"))
    assert files, f"fixture {name} has no HLO dump"
    return _module(files[0])


def _collective(instr) -> dict | None:
    """The collective facts a rule reads (kind, output bytes), as the report's JSON has them."""
    kind = collective_kind(instr.opcode)
    return {"kind": kind, "bytes": hlo_checks.shape_bytes(instr.shape)} if kind else None


def _context(module, instr, *, category: str, measured_s: float = 1e-3, **fields) -> OpContext:
    entry = OpEntry(
        key=f"{module.name}|{instr.name}",
        module=module.name,
        name=instr.name,
        opcode=instr.opcode,
        category=category,
        occurrences=1,
        measured_s=measured_s,
        flops=fields.pop("flops", 0.0),
        hbm_bytes=fields.pop("hbm_bytes", 0.0),
        ici_bytes=0.0,
        t_compute_s=0.0,
        t_hbm_s=0.0,
        t_ici_s=0.0,
        roofline_s=fields.pop("roofline_s", 0.0),
        bound_by=fields.pop("bound_by", "hbm"),
        efficiency=fields.pop("efficiency", None),
        collective=_collective(instr),
        **fields,
    )
    return OpContext(entry, instr, module)


def _report(
    kind: str = "TPU", chip: ChipSection | None = None, summary: Summary | None = None
) -> Report:
    return Report(
        device=Device(kind=kind, count=1),
        chip=chip or ChipSection(),
        steps=[],
        summary=summary or Summary(),
        ops=[],
        findings=[],
        unmatched=[],
    )


def test_matmul_dims_agree_with_output_shape_and_meta(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp")
    dots = [i for i in module.instructions() if i.opcode == "dot"]
    assert dots
    for dot in dots:
        dims = hlo_checks.matmul_dims(dot, module)
        assert dims is not None
        # batch × M × N is the output's element count (independent of how dims were picked)
        assert dims.batch * dims.m * dims.n == dot.shape.num_elements
        assert dims.dtype == "f32"
    # every contracting size is one of the MLP's (local) dims from meta.json: 128/256 split by 2,
    # batch 64 split by 4 (data)
    allowed = {16, 64, 128, 256}
    assert {hlo_checks.matmul_dims(d, module).k for d in dots} <= allowed


def test_small_matmul_fires_on_tpu_only(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp")
    dot = next(i for i in module.instructions() if i.opcode == "dot")
    dims = hlo_checks.matmul_dims(dot, module)
    assert min(dims.m, dims.n, dims.k) < 128  # 64-row batch split 4 ways: 16-row blocks
    ctx = [_context(module, dot, category="matmul")]
    found = rules.small_matmul(_report("TPU"), ctx, RuleConfig())
    assert [f.rule for f in found] == ["small-matmul"]
    assert "below the 128-wide MXU" in found[0].message
    assert rules.small_matmul(_report("CPU"), ctx, RuleConfig()) == []
    # with the chip's own MXU size of 8 nothing is "small"
    assert rules.small_matmul(_report("TPU", ChipSection(mxu_size=8)), ctx, RuleConfig()) == []


def test_f32_matmul_on_gpu(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp")
    dot = next(i for i in module.instructions() if i.opcode == "dot")
    ctx = [_context(module, dot, category="matmul")]
    assert [f.rule for f in rules.f32_matmul(_report("GPU"), ctx, RuleConfig())] == ["f32-matmul"]
    assert rules.f32_matmul(_report("CPU"), ctx, RuleConfig()) == []


def test_fusion_around_dot_is_found(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp")
    fusions = [i for i in module.instructions() if i.opcode == "fusion"]
    with_dot = [f for f in fusions if hlo_checks.find_dot(f, module) is not None]
    assert with_dot, "the CPU MLP fuses its dots"
    for fusion in with_dot:
        inner, _ = hlo_checks.find_dot(fusion, module)
        assert inner.computation in called_computations(fusion)


def test_relayout_agrees_with_attribution(fixtures_dir: Path) -> None:
    from profan.attribute import classify

    module = _fixture_module(fixtures_dir, "mlp_worse")
    relayouts = [i for i in module.entry.instructions if hlo_checks.is_relayout(i, module)]
    assert relayouts, "mlp_worse's HLO has copy/transpose fusions"
    for instr in relayouts:
        assert classify(instr, module).category == "data-movement"


def test_relayout_copy_rule_threshold(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp_worse")
    relayout = next(i for i in module.entry.instructions if hlo_checks.is_relayout(i, module))
    other = next(i for i in module.entry.instructions if i.opcode == "fusion" and i is not relayout)
    bytes_moved = hlo_checks.shape_bytes(relayout.shape) * 2
    ops = [
        _context(module, relayout, category="data-movement", hbm_bytes=bytes_moved),
        _context(module, other, category="elementwise", hbm_bytes=bytes_moved * 9),
    ]
    found = rules.relayout_copy(_report(), ops, RuleConfig())  # 10% of bytes > 5%
    assert [(f.rule, f.name) for f in found] == [("relayout-copy", relayout.name)]
    assert rules.relayout_copy(_report(), ops, RuleConfig(relayout_bytes_share_above=0.2)) == []


def test_padding_ratio_of_tiled_layout(corpus_dir: Path) -> None:
    module = _module(corpus_dir / "hlo/xla/xla__service__io_param_test__0.hlo")
    add = module.entry.get("b")
    # f32[10,10]{0,1:T(8,128)}: physical [10,10] padded to [16,128]
    assert padding_ratio(add.shape) == pytest.approx(16 * 128 / 100)
    found = rules.tile_padding(
        _report(), [_context(module, add, category="elementwise")], RuleConfig()
    )
    assert [f.rule for f in found] == ["tile-padding"]
    assert "20.48×" in found[0].message


def test_padding_none_when_dims_fit_tiles(corpus_dir: Path) -> None:
    hlo = corpus_dir / "traces/tpu_v6e_inference.hlo"
    module = _module(next(hlo.glob("jit__psum*.hlo")))
    reduce = module.entry.get("all-reduce")
    assert padding_ratio(reduce.shape) == 1.0  # f32[5,1024,1024,256] in T(8,128)


def test_repeated_collective_on_xla_cse_test(corpus_dir: Path) -> None:
    module = _module(
        corpus_dir / "hlo/xla/xla__hlo__transforms__collectives__all_gather_cse_test__0.hlo"
    )
    gathers = [i for i in module.instructions() if i.opcode == "all-gather"]
    ops = [_context(module, g, category="collective") for g in gathers]
    found = rules.repeated_collective(_report(), ops, RuleConfig())
    assert sorted(f.name for f in found) == ["all-gather.1", "all-gather.2"]
    assert all("2 identical all-gathers" in f.message for f in found)


def test_distinct_collectives_not_repeated(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp_worse")
    collectives = [i for i in module.instructions() if collective_kind(i.opcode)]
    assert len(collectives) == 3  # meta.json's hlo_collectives
    ops = [_context(module, c, category="collective") for c in collectives]
    assert rules.repeated_collective(_report(), ops, RuleConfig()) == []


def test_large_allgather_of_weight(corpus_dir: Path) -> None:
    module = _module(
        corpus_dir / "hlo/xla/xla__hlo__transforms__collectives__all_gather_cse_test__0.hlo"
    )
    gather = module.entry.get("all-gather.1")
    assert hlo_checks.feeds_from_parameter(gather, module)
    ops = [_context(module, gather, category="collective")]
    chip = ChipSection(hbm_capacity_bytes=16e9)
    assert rules.large_allgather(_report(chip=chip), ops, RuleConfig()) == []  # 32 bytes
    tiny_share = RuleConfig(allgather_hbm_fraction_above=1e-9)  # 16 bytes of 16 GB
    found = rules.large_allgather(_report(chip=chip), ops, tiny_share)
    assert [f.rule for f in found] == ["large-allgather"]


def test_activation_allgather_is_not_a_weight(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp_worse")
    gather = next(i for i in module.instructions() if i.opcode == "all-gather")
    # meta.json: the worse sharding gathers the activation h, not a weight
    assert not hlo_checks.feeds_from_parameter(gather, module)


def test_latency_bound_collectives_need_several(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "collectives")
    collectives = [i for i in module.instructions() if collective_kind(i.opcode)]
    ops = [_context(module, c, category="collective", bound_by="ici") for c in collectives]
    # f32[8,32] psums and an f32[8,64] all-gather: 1-2 kB each
    assert sorted(op.entry.collective["bytes"] for op in ops)[-1] == 8 * 64 * 4
    found = rules.latency_bound_collectives(_report(), ops, RuleConfig())
    assert len(found) == len(collectives) >= 3
    # the MLP's gradient all-reduce moves 2 × f32[128,128] = 131 kB: not latency-bound
    mlp = _fixture_module(fixtures_dir, "mlp")
    big = mlp.entry.get("all-reduce.4")
    assert (
        rules.latency_bound_collectives(
            _report(), [_context(mlp, big, category="collective", bound_by="ici")] * 2, RuleConfig()
        )
        == []
    )
    assert rules.latency_bound_collectives(_report(), ops[:1], RuleConfig()) == []


def test_far_from_roofline_threshold(fixtures_dir: Path) -> None:
    module = _fixture_module(fixtures_dir, "mlp")
    instr = next(i for i in module.instructions() if i.opcode == "fusion")
    slow = _context(module, instr, category="elementwise", roofline_s=1e-5, efficiency=0.01)
    fast = _context(module, instr, category="elementwise", roofline_s=9e-4, efficiency=0.9)
    assert [f.rule for f in rules.far_from_roofline(_report(), [slow], RuleConfig())] == [
        "far-from-roofline"
    ]
    assert rules.far_from_roofline(_report(), [fast], RuleConfig()) == []


def test_idle_gaps_rule() -> None:
    summary = Summary(
        step_time_median_s=1e-3, inter_step_gap_max_s=5e-4, inter_step_gap_total_s=1e-3
    )
    found = rules.idle_gaps(_report(summary=summary), [], RuleConfig())
    assert [f.rule for f in found] == ["idle-gaps"]
    summary.inter_step_gap_max_s = 5e-5
    assert rules.idle_gaps(_report(summary=summary), [], RuleConfig()) == []


def test_rule_config_from_toml_table() -> None:
    from profan.errors import ConfigError

    config = RuleConfig.from_mapping({"efficiency_below": 0.3, "disabled": ["idle-gaps"]})
    assert config.efficiency_below == 0.3 and config.disabled == ("idle-gaps",)
    with pytest.raises(ConfigError, match="rules: unknown field 'efficiency'"):
        RuleConfig.from_mapping({"efficiency": 0.3})
    with pytest.raises(ConfigError, match=r"rules\.efficiency_below: must be a number"):
        RuleConfig.from_mapping({"efficiency_below": "low"})
