"""Scoring: per-op roofline terms, efficiency, steps and MFU; compile-time scoring of a module."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from profan.chips import get_chip
from profan.cost import estimate
from profan.hlo.parser import parse_module
from profan.roofline import op_times, score, score_module
from profan.trace.profile import OP_COLUMNS, DeviceInfo, Profile
from tests.conftest import FIXTURES_DIR

MATMUL_HLO = next((FIXTURES_DIR / "matmul" / "hlo").glob("*after_optimizations.txt"))


def _matmul_profile(durations: list[float], device: DeviceInfo) -> Profile:
    """A Profile built by hand around the real matmul fixture module (one dot per step)."""
    module = parse_module(MATMUL_HLO.read_text(), file=str(MATMUL_HLO))
    dot = next(i for i in module.entry.instructions if i.opcode in ("dot", "fusion"))
    rows = []
    for step, duration in enumerate(durations):
        row = dict.fromkeys(OP_COLUMNS)
        row.update(host="h", device=0, device_kind="CPU", module=module.name,
                   module_key="m", program_id=1, op_name=dot.name, step=step,
                   start_s=float(step), duration_s=duration, trace_flops=math.nan,
                   trace_bytes_accessed=math.nan, trace_model_flops=math.nan,
                   source=None, matched=True)  # fmt: skip
        rows.append(row)
    steps = pd.DataFrame(
        {"step": range(len(durations)), "start_s": [float(s) for s in range(len(durations))],
         "end_s": [s + d for s, d in enumerate(durations)], "duration_s": durations}
    )  # fmt: skip
    return Profile(path="synthetic", run=None, ops=pd.DataFrame(rows), steps=steps,
                   device=device, modules={"m": module})  # fmt: skip


def test_score_efficiency_and_mfu_from_the_formula() -> None:
    cpu = get_chip("cpu")
    flops = 2 * 256 * 512 * 1024
    ideal = max(flops / cpu.device_peak_flops("f32"), 3670016 / cpu.device_hbm_bytes_per_s)
    profile = _matmul_profile([2 * ideal, 4 * ideal],
                              DeviceInfo(kind="CPU", type_string="cpu", count=1))  # fmt: skip
    result = score(profile)
    assert result.chip.name == "cpu"
    (row,) = result.ops
    assert row.occurrences == 2 and row.flops == 2 * flops
    assert row.bound_by == "compute"
    assert row.roofline_s == pytest.approx(2 * ideal)
    assert row.efficiency == pytest.approx(2 * ideal / (6 * ideal))
    steps = result.steps
    assert [s.ideal_s for s in steps] == pytest.approx([ideal, ideal])
    assert [s.efficiency for s in steps] == pytest.approx([0.5, 0.25])
    peak = cpu.device_peak_flops("bf16")
    assert [s.mfu for s in steps] == pytest.approx(
        [flops / (peak * 2 * ideal), flops / (peak * 4 * ideal)]
    )
    assert [s.share_compute for s in steps] == pytest.approx([1.0, 1.0])
    assert result.summary.efficiency == pytest.approx(1 / 3)


def test_trace_peaks_drive_the_score() -> None:
    device = DeviceInfo(kind="CPU", type_string="cpu", count=1, peak_flops_per_s=4e11,
                        peak_hbm_bytes_per_s=2e11)  # fmt: skip
    result = score(_matmul_profile([1e-3], device))
    sources = result.summary.figure_sources
    assert sources["peak_flops.bf16"] == "trace" and sources["hbm_bytes_per_s"] == "trace"
    assert sources["peak_flops.f32"] == "catalogue"  # the trace's peak is the bf16 rate
    assert result.summary.peak_flops_per_s == 4e11
    row = result.ops[0]
    assert row.occurrences == 1
    assert row.t_hbm_s == pytest.approx(3670016 / 2e11)
    assert row.dtype == "f32"
    f32_peak = get_chip("cpu").peak_flops["f32"]
    assert row.t_compute_s == pytest.approx(2 * 256 * 512 * 1024 / f32_peak)


def test_op_times_pick_the_largest_term() -> None:
    module = parse_module(MATMUL_HLO.read_text())
    dot = next(i for i in module.entry.instructions if i.opcode in ("dot", "fusion"))
    v5e = get_chip("tpu-v5e")
    times = op_times(estimate(dot, module), v5e)
    assert times.roofline_s == max(times.t_compute_s, times.t_hbm_s)
    # f32 has no v5e catalogue rate: the bf16 rate is used
    assert times.t_compute_s == pytest.approx(2 * 256 * 512 * 1024 / 1.97e14)


SYNTHETIC_WHILE_MODULE = """HloModule synthetic_loop

%body (p: (s32[], f32[128,128])) -> (s32[], f32[128,128]) {
  %p = (s32[], f32[128,128]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %x = f32[128,128]{1,0} get-tuple-element(%p), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %y = f32[128,128]{1,0} dot(%x, %x), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %t = (s32[], f32[128,128]{1,0}) tuple(%next, %y)
}

%cond (p: (s32[], f32[128,128])) -> pred[] {
  %p = (s32[], f32[128,128]{1,0}) parameter(0)
  %i = s32[] get-tuple-element(%p), index=0
  %n = s32[] constant(10)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%fused (a: f32[128,128]) -> f32[128,128] {
  %a = f32[128,128]{1,0} parameter(0)
  ROOT %e = f32[128,128]{1,0} exponential(%a)
}

ENTRY %main (x: f32[128,128]) -> f32[128,128] {
  %x = f32[128,128]{1,0} parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[128,128]{1,0}) tuple(%zero, %x)
  %w = (s32[], f32[128,128]{1,0}) while(%init), condition=%cond, body=%body, TRIP
  %r = f32[128,128]{1,0} get-tuple-element(%w), index=1
  ROOT %f = f32[128,128]{1,0} fusion(%r), kind=kLoop, calls=%fused
}
""".replace("TRIP", 'backend_config={"known_trip_count":{"n":"10"}}')


def test_score_module_lists_loop_bodies_not_fused_bodies() -> None:
    ops = score_module(parse_module(SYNTHETIC_WHILE_MODULE), "tpu-v5e")
    names = {op.name for op in ops}
    assert {"y", "f", "lt", "next"} <= names
    assert "e" not in names  # inside the fusion: scored as part of %f
    dot = next(op for op in ops if op.name == "y")
    assert dot.occurrences == 10  # the loop's known trip count
    assert dot.flops == 10 * 2 * 128**3
    times = [op.roofline_s for op in ops]
    assert times == sorted(times, reverse=True)


def test_score_module_on_a_real_tpu_module(corpus_dir: Path) -> None:
    path = next((corpus_dir / "traces" / "tpu_v6e_inference.hlo").glob("jit_f(*"))
    ops = score_module(parse_module(path.read_text()), "tpu-v6e")
    fusions = [op for op in ops if op.opcode == "fusion"]
    assert len(fusions) == 3
    # each fusion reads and writes 5 GiB of f32: HBM-bound at 1.6e12 B/s
    assert all(op.bound_by == "hbm" for op in fusions)
    assert [op.roofline_s for op in fusions] == pytest.approx([2 * 5 * 2**30 / 1.6e12] * 3)
    # the host -> HBM copies are PCIe-bound, scored on the done
    assert all(op.bound_by == "async-start" for op in ops if op.opcode == "copy-start")
    assert all(op.bound_by == "host" for op in ops if op.opcode == "copy-done")


def test_trace_figures_fill_in_for_ops_profan_cannot_cost() -> None:
    module = parse_module(
        "HloModule synthetic_kernel\n\nENTRY %main (x: bf16[256,256]) -> bf16[256,256] {\n"
        "  %x = bf16[256,256]{1,0} parameter(0)\n"
        '  ROOT %k = bf16[256,256]{1,0} custom-call(%x), custom_call_target="tpu_custom_call"\n'
        "}\n"
    )
    row = dict.fromkeys(OP_COLUMNS)
    row.update(host="h", device=0, device_kind="TPU", module=module.name, module_key="m",
               program_id=1, op_name="k", step=0, start_s=0.0, duration_s=1e-3,
               trace_flops=4e9, trace_bytes_accessed=3e5, trace_model_flops=math.nan,
               source=None, matched=True)  # fmt: skip
    profile = Profile(
        path="synthetic", run=None, ops=pd.DataFrame([row]),
        steps=pd.DataFrame({"step": [0], "start_s": [0.0], "end_s": [1e-3], "duration_s": [1e-3]}),
        device=DeviceInfo(kind="TPU", type_string="TPU v5 lite", count=1), modules={"m": module},
    )  # fmt: skip
    result = score(profile).ops[0]
    assert result.cost_source == "trace"
    assert (result.flops, result.hbm_bytes) == (4e9, 3e5)
    assert result.t_compute_s == pytest.approx(4e9 / 1.97e14)


@pytest.mark.parametrize("name", ["collectives", "matmul", "mlp", "mlp_worse", "transformer"])
def test_fixture_traces_never_beat_their_roofline(name: str) -> None:
    import profan

    trace = FIXTURES_DIR / name / "trace"
    if not trace.is_dir():
        pytest.skip(f"fixture {name} has no trace")
    result = score(profan.load(str(trace)))
    assert result.chip.name == "cpu"
    assert not result.summary.unknown_cost_ops
    # A roofline is a lower bound: no op and no step may beat it (the generic CPU figures are
    # set generously for that; in-place scatters are charged only their touched rows).
    beaten = [op for op in result.ops if op.efficiency is not None and op.efficiency > 1.0]
    assert not beaten, beaten[:3]
    assert all(s.ideal_s <= s.measured_s for s in result.steps)
    assert all(s.mfu is not None and s.mfu > 0 for s in result.steps) or name == "collectives"


def _one_op_profile(module_text: str, op: str, trace_flops: float, trace_bytes: float) -> Profile:
    module = parse_module(module_text)
    row = dict.fromkeys(OP_COLUMNS)
    row.update(host="h", device=0, device_kind="TPU", module=module.name, module_key="m",
               program_id=1, op_name=op, step=0, start_s=0.0, duration_s=75e-6,
               trace_flops=trace_flops, trace_bytes_accessed=trace_bytes,
               trace_model_flops=math.nan, source=None, matched=True)  # fmt: skip
    return Profile(
        path="synthetic", run=None, ops=pd.DataFrame([row]),
        steps=pd.DataFrame({"step": [0], "start_s": [0.0], "end_s": [75e-6],
                            "duration_s": [75e-6]}),
        device=DeviceInfo(kind="TPU", type_string="TPU v6 lite", count=1), modules={"m": module},
    )  # fmt: skip


def test_synthetic_pallas_matmul_never_takes_the_traces_implausible_figures() -> None:
    # Issue 10: a Pallas (Mosaic) f32 matmul 2048x1024x2048 on v6e whose trace stats say 0 bytes
    # and 1.08 GFLOP per call.  It must read its operands and write its result (>= 33.5 MB) and
    # do 2*2048*2048*1024 = 8.6 GFLOP; the trace's figure is shown beside the model's.
    text = (
        "HloModule synthetic_pallas\n\nENTRY %main (x: f32[2048,1024], y: f32[1024,2048]) -> "
        "f32[2048,2048] {\n"
        "  %x = f32[2048,1024]{1,0} parameter(0)\n"
        "  %y = f32[1024,2048]{1,0} parameter(1)\n"
        '  ROOT %k = f32[2048,2048]{1,0} custom-call(%x, %y), custom_call_target="tpu_custom_call"'
        "\n}\n"
    )
    row = score(_one_op_profile(text, "k", 1.08e9, 0.0)).ops[0]
    flops, io_bytes = 2 * 2048 * 2048 * 1024, (2 * 2048 * 1024 + 2048 * 2048) * 4
    assert row.flops == flops and row.hbm_bytes == io_bytes == 33_554_432
    assert row.flops_source == "shape-signature" and row.bytes_source == "lower-bound"
    assert row.trace_flops == 1.08e9 and row.trace_bytes == 0.0
    assert "more than 2x apart" in row.derivation and "not used" in row.derivation
    v6e = get_chip("tpu-v6e")
    assert row.bound_by == "hbm"
    assert row.t_hbm_s == pytest.approx(io_bytes / v6e.device_hbm_bytes_per_s)
    assert row.efficiency == pytest.approx(io_bytes / v6e.device_hbm_bytes_per_s / 75e-6)
