"""The same programs recorded on two chips: ``fixtures/<group>`` on an H100 and
``fixtures/<group>_h200`` on an H200 (same script, JAX and CUDA; fixtures/README.md).

What must not depend on the chip, and what must, the way the hardware says:

* profan tells the two apart from the trace alone (both are compute capability 9.0; the memory
  size decides) and takes each one's HBM bandwidth from the trace, close to chips.toml's;
* an op both compilations hold (same module, same name, same structure) costs the same FLOPs
  and bytes on both: the cost is the program's, not the chip's;
* its ideal differs only by the chips' figures: the same compute and transcendental terms (the
  same Hopper SMs at the same clock), the HBM term shorter by exactly the bandwidth ratio;
* measured, the big HBM-bound ops run faster on the H200, by about its extra bandwidth, and the
  compute-bound matrix ops about as fast;
* on the H200 too: 0 unmatched events, and an op measured faster than its roofline is one the
  L2 cache (or an execution split over several events) explains, in its note.

XLA compiled the programs for each chip itself, so the HLO is not identical: the autotuner picks
other tiles and libraries (``jit_attention_xla``'s Q.K^T gemm is a Triton fusion on the H100 and
a cuBLAS call on the H200), and the train step's fusion plan differs in a few dozen small fusions
(renumbered names). Ops are paired only where name and structure agree.
"""

from __future__ import annotations

import dataclasses
from functools import cache

import pandas as pd
import pytest

import profan
from profan.chips import Chip, get_chip
from profan.hlo.model import Instruction, Module
from profan.hlo.views import called_computations, custom_call_target
from profan.report.analysis.pipeline import describe_shardings, resolve_layout
from profan.roofline import Score, score
from tests.conftest import FIXTURES_DIR

GROUPS = ("gpu_kernels", "gpu_transformer", "gpu_transformer_nocb")
# Per-execution figures of each op (a row holds them summed over its events).
PER_EXECUTION = (
    "flops", "hbm_bytes", "t_compute_s", "t_hbm_s", "t_transcendental_s", "roofline_s",
    "measured_s",
)  # fmt: skip


@cache
def _scored(folder: str) -> tuple[profan.Profile, Score]:
    trace, hlo = resolve_layout(FIXTURES_DIR / folder, None)
    profile = profan.load(trace, hlo=hlo)
    return profile, score(profile, shardings=describe_shardings(profile))


def _structure(module: Module, instruction: Instruction) -> tuple:
    """What an op is, without its name: opcode, shapes, custom-call target, operand shapes and
    (for a fusion, loop or call) the same of every instruction it calls, recursively."""
    computation = module.computation(instruction.computation)
    operands = []
    for name in instruction.operand_names:
        found = computation.get(name)
        operands.append(repr(found.shape) if found is not None else name)
    called = tuple(
        _structure(module, inner)
        for name in called_computations(instruction)
        for inner in module.computation(name).instructions
    )
    target = custom_call_target(instruction)
    return instruction.opcode, repr(instruction.shape), target, tuple(operands), called


def _ops(folder: str) -> pd.DataFrame:
    """The scored ops, per execution, indexed by (module, name), with their structure."""
    profile, result = _scored(folder)
    ops = pd.DataFrame([dataclasses.asdict(op) for op in result.ops])  # a table of the records
    for column in PER_EXECUTION:
        ops[column] = ops[column] / ops["occurrences"]
    ops["structure"] = [
        _structure(profile.modules[key], profile.instruction(key, name))
        for key, name in zip(ops["module_key"], ops["name"], strict=True)
    ]
    return ops.set_index(["module", "name"])


@cache
def _pairs(group: str) -> pd.DataFrame:
    """Ops in both recordings with the same name and structure: columns ``<x>_h100``,
    ``<x>_h200``."""
    h100, h200 = _ops(group), _ops(f"{group}_h200")
    both = h100.join(h200, how="inner", suffixes=("_h100", "_h200"))
    return both[both["structure_h100"] == both["structure_h200"]]


def _bandwidths(group: str) -> tuple[float, float]:
    return tuple(_scored(f)[1].chip.device_hbm_bytes_per_s for f in (group, f"{group}_h200"))


@pytest.mark.parametrize("group", GROUPS)
def test_profan_tells_the_chips_apart_from_the_trace(group: str) -> None:
    chips: list[Chip] = [_scored(folder)[1].chip for folder in (group, f"{group}_h200")]
    assert [chip.name for chip in chips] == ["h100", "h200"]
    assert "nearest h200's 141 GB" in chips[1].figure_sources["chip"]
    for chip in chips:
        catalogue = get_chip(chip.name)
        # The bandwidth is the trace's own (the driver's 3.352 / 4.814 TB/s), within 1% of the
        # datasheet's 3.35 / 4.8 TB/s in chips.toml; the compute peaks are chips.toml's.
        assert chip.figure_sources["hbm_bytes_per_s"] == "trace"
        assert chip.hbm_bytes_per_s == pytest.approx(catalogue.hbm_bytes_per_s, rel=0.01)
        assert chip.peak_flops == catalogue.peak_flops
    # The same Hopper compute on both: every dtype's peak and the transcendental rate.
    assert chips[0].peak_flops == chips[1].peak_flops
    assert chips[0].transcendentals_per_s == chips[1].transcendentals_per_s
    h100_bw, h200_bw = _bandwidths(group)
    assert h200_bw / h100_bw == pytest.approx(4.8 / 3.35, rel=0.01)


@pytest.mark.parametrize("group", GROUPS)
def test_the_paired_ops_hold_the_programs_math(group: str) -> None:
    """The pairing is no sample: the ops both compilations share hold nearly all the FLOPs
    (96% in gpu_kernels, where one gemm moved library; >99.9% in the train step) and ~90% of
    the measured time on each chip."""
    pairs = _pairs(group)
    for chip in ("h100", "h200"):
        ops = _ops(group if chip == "h100" else f"{group}_h200")
        total_flops = (ops["flops"] * ops["occurrences"]).sum()
        paired_flops = (pairs[f"flops_{chip}"] * pairs[f"occurrences_{chip}"]).sum()
        assert paired_flops >= 0.95 * total_flops, chip
        total_time = (ops["measured_s"] * ops["occurrences"]).sum()
        paired_time = (pairs[f"measured_s_{chip}"] * pairs[f"occurrences_{chip}"]).sum()
        assert paired_time >= 0.85 * total_time, chip
        assert len(pairs) >= 0.8 * len(ops), chip


def test_the_kernels_differ_only_in_the_gemm_the_autotuner_moved() -> None:
    h100, h200 = _ops("gpu_kernels"), _ops("gpu_kernels_h200")
    paired = set(_pairs("gpu_kernels").index)
    assert set(h100.index) - paired == {("jit_attention_xla", "gemm_fusion_dot.5")}
    assert set(h200.index) - paired == {
        ("jit_attention_xla", name) for name in ("custom-call.0", "fusion.14", "fusion.15")
    }
    moved = h200.loc[("jit_attention_xla", "custom-call.0")]
    assert moved["structure"][2] == "__cublas$lt$matmul"  # the custom-call target
    # The same Q.K^T batched matmul either way, 32 x 2048 x 2048 x 128 multiply-adds, scaled by
    # 1/sqrt(128): on the H100 a multiply fused after the dot (one FLOP per output element), on
    # the H200 cuBLAS's alpha (0.0884 in its backend config), which the gemm model leaves out.
    scores = 32 * 2048 * 2048
    assert moved["flops"] == 2 * scores * 128
    fused = h100.loc[("jit_attention_xla", "gemm_fusion_dot.5"), "flops"]
    assert fused == 2 * scores * 128 + scores


@pytest.mark.parametrize("group", GROUPS)
def test_paired_ops_cost_the_same_on_both_chips(group: str) -> None:
    pairs = _pairs(group)
    for column in ("flops", "hbm_bytes", "flops_source", "bytes_source", "category"):
        h100, h200 = pairs[f"{column}_h100"], pairs[f"{column}_h200"]
        if column in ("flops", "hbm_bytes"):  # per execution: totals / events, so not bitwise
            same = ((h100 - h200).abs() <= 1e-12 * h100.abs()) | (h100.isna() & h200.isna())
        else:
            same = h100 == h200
        assert same.all(), (column, pairs.index[~same].tolist())


@pytest.mark.parametrize("group", GROUPS)
def test_ideal_terms_differ_by_the_chips_figures_alone(group: str) -> None:
    pairs = _pairs(group)
    costed = pairs[pairs["roofline_s_h100"] > 0]
    assert len(costed) >= len(pairs) - 1  # the one op of unknown cost (an implicit element)
    h100_bw, h200_bw = _bandwidths(group)
    for term in ("t_compute_s", "t_transcendental_s"):
        assert (costed[f"{term}_h100"] == costed[f"{term}_h200"]).all(), term
    moving = costed[costed["t_hbm_s_h100"] > 0]
    scaled = (moving["t_hbm_s_h100"] / moving["t_hbm_s_h200"]).to_numpy()
    assert scaled == pytest.approx(h200_bw / h100_bw, rel=1e-12)
    ratio = costed["roofline_s_h100"] / costed["roofline_s_h200"]
    assert ((ratio >= 1 - 1e-12) & (ratio <= h200_bw / h100_bw * (1 + 1e-12))).all()
    # a faster memory can only move an op from HBM-bound to compute-bound, never back
    flips = costed[costed["bound_by_h100"] != costed["bound_by_h200"]]
    assert ((flips["bound_by_h100"] == "hbm") & (flips["bound_by_h200"] == "compute")).all()


def _timed_pairs(group: str) -> pd.DataFrame:
    """Pairs with one event per execution on both chips (an op whose execution the trace split
    over several events on one chip has no comparable per-event time)."""
    pairs = _pairs(group)
    return pairs[pairs["occurrences_h100"] == pairs["occurrences_h200"]]


def _speedup_in_all(pairs: pd.DataFrame) -> float:
    """The H100's time over the H200's, summed over the ops (per execution)."""
    return float(pairs["measured_s_h100"].sum() / pairs["measured_s_h200"].sum())


@pytest.mark.parametrize("group", GROUPS)
def test_hbm_bound_ops_run_faster_on_the_h200_and_matrix_ops_as_fast(group: str) -> None:
    pairs = _timed_pairs(group)
    h100_bw, h200_bw = _bandwidths(group)
    speedup = pairs["measured_s_h100"] / pairs["measured_s_h200"]
    # Big HBM-bound ops: bound by HBM on both chips, >= 20 us (launch overhead under ~10%), and
    # at >= 70% of the H100's bandwidth (bound by it in fact, not by latency). Measured: 1.32x
    # (kernels), 1.33x and 1.34x (train step) in all, against the bandwidth ratio of 1.44x; no
    # such op slower on the H200. An op alone can gain more than the ratio (L2 reuse): 1.53x.
    streaming = (
        (pairs["bound_by_h100"] == "hbm")
        & (pairs["bound_by_h200"] == "hbm")
        & (pairs["measured_s_h100"] >= 20e-6)
        & (pairs["efficiency_h100"] >= 0.7)
    )
    assert streaming.sum() >= 2
    overall = _speedup_in_all(pairs[streaming])
    assert 1.25 <= overall <= h200_bw / h100_bw * 1.05, overall
    assert (speedup[streaming] >= 0.95).all(), speedup[streaming].sort_values().head()
    # Compute-bound matrix ops of >= 10 GFLOP: the same SMs at the same 1980 MHz. Measured
    # 1.01x-1.02x in all; alone 0.91x-1.08x, as the autotuner picked other tiles per chip.
    matrix = (
        (pairs["category_h100"] == "matmul")
        & (pairs["bound_by_h100"] == "compute")
        & (pairs["bound_by_h200"] == "compute")
        & (pairs["flops_h100"] >= 1e10)
    )
    assert matrix.sum() >= 5
    assert _speedup_in_all(pairs[matrix]) == pytest.approx(1.0, abs=0.05)
    assert speedup[matrix].between(0.85, 1.2).all(), speedup[matrix].sort_values()


@pytest.mark.parametrize("group", GROUPS)
def test_the_h200_recordings_keep_the_invariants(group: str) -> None:
    h100_profile, h100 = _scored(group)
    h200_profile, h200 = _scored(f"{group}_h200")
    for profile in (h100_profile, h200_profile):
        assert profile.unmatched == [] and profile.ops["matched"].all()
    steps = h200.steps
    assert all(s.ideal_s <= s.measured_s for s in steps)
    assert all(s.efficiency is not None and s.efficiency <= 1 for s in steps)
    faster = [op for op in h200.ops if op.efficiency is not None and op.efficiency > 1]
    for row in faster:
        why = "L2 cache" if row.bound_by == "hbm" else "splits an execution"
        assert why in row.note, (row.name, row.note)
    # A faster memory leaves less for the L2 cache to win over it: fewer ops beat the roofline.
    assert len(faster) <= sum(op.efficiency is not None and op.efficiency > 1 for op in h100.ops)
