"""Scoring the real TPU v6e trace loaded with ``profan.load``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import profan
from profan.cost import estimate
from profan.roofline import score


@pytest.fixture(scope="module")
def v6e_profile(corpus_dir: Path):
    return profan.load(str(corpus_dir / "traces" / "tpu_v6e_inference.xplane.pb"))


def test_per_op_figures_agree_with_the_embedded_modules(v6e_profile) -> None:
    # Same check as test_cost_tpu_trace, through profan.load and the HloProto modules the
    # trace embeds (their all-reduce has replica_groups=[4,2]<=[2,4]T(1,0), unlike the text dump);
    # the trace's bytes_accessed counts every memory space (a host copy's start reads host memory)
    ops = v6e_profile.ops.drop_duplicates(["module_key", "op_name"])
    agree, disagree = 0, []
    for row in ops.itertuples():
        instruction = v6e_profile.instruction(row.module_key, row.op_name)
        assert instruction is not None
        cost = estimate(instruction, v6e_profile.modules[row.module_key])
        theirs_flops = 0.0 if math.isnan(row.trace_flops) else row.trace_flops
        if (cost.flops or 0.0) == pytest.approx(theirs_flops, rel=0.01) and (
            cost.all_space_bytes == pytest.approx(row.trace_bytes_accessed, rel=0.01)
        ):
            agree += 1
        else:
            disagree.append((row.op_name, cost.flops, theirs_flops, cost.bytes_by_space))
    assert agree >= 15 and not disagree, disagree


def test_score_uses_the_traces_own_peaks_and_stays_a_lower_bound(v6e_profile) -> None:
    result = score(v6e_profile)
    assert result.chip.name == "tpu-v6e"
    sources = result.summary.figure_sources
    assert sources["peak_flops.bf16"] == "trace" and sources["hbm_bytes_per_s"] == "trace"
    ops = {op.name: op for op in result.ops}
    # the three broadcast-add fusions read + write 5 GiB each: HBM-bound at the trace's 1638 GB/s
    for name in ("broadcast_add_fusion", "broadcast_add_fusion.1", "broadcast_add_fusion.2"):
        row = ops[name]
        assert row.bound_by == "hbm"
        per_run = row.roofline_s / row.occurrences
        assert per_run == pytest.approx(2 * 5 * 2**30 / 1637.993152512e9)
    # the all-reduce runs over groups of 2 on the ICI
    assert ops["all-reduce"].bound_by == "ici"
    # A roofline is a lower bound: no synchronous op and no step beat it.
    assert all(op.efficiency <= 1.0 for op in result.ops if op.efficiency is not None)
    assert all(s.ideal_s <= s.measured_s for s in result.steps)
    assert len(result.steps) == len(v6e_profile.steps)
    # host <-> device copies dominate this program's steps
    assert min(s.share_host for s in result.steps) > 0.9
    # async dones are scored over their spans on the async line (test_roofline_async_spans)
    dones = [op for op in result.ops if op.opcode == "copy-done"]
    assert len(dones) == 6 and all(op.async_span_s is not None for op in dones)
    assert 0 < result.summary.efficiency <= 1.0


def test_scored_figures_equal_the_traces_own_stats(v6e_profile) -> None:
    # The TPU compiler's per-op flops and bytes_accessed in the trace are the cross-check of what
    # the records of Score.ops say (after demand analysis, sources and reconciliation): all 17
    # ops agree.
    # bytes_accessed counts every memory space: a host copy's start reads host memory, the
    # done writes HBM (or the other way round), so the HBM figure is on one half only.
    ops = score(v6e_profile).ops
    assert len(ops) == 17
    for row in ops:
        assert row.flops == pytest.approx(row.trace_flops, rel=0.01, abs=0.5), row.name
        all_spaces = sum(row.bytes_by_space.values())
        assert all_spaces == pytest.approx(row.trace_bytes, rel=0.01), row.name
        assert row.bytes_by_space["hbm"] == row.hbm_bytes
        if row.opcode.startswith("copy-"):  # each half moves the array in one space
            assert set(row.bytes_by_space) <= {"hbm", "host"}, row.name
            assert max(row.bytes_by_space.values()) == all_spaces > 0, row.name
        assert (row.flops_source, row.bytes_source) == ("hlo", "hlo"), row.name
        assert "more than 2x apart" not in row.derivation
