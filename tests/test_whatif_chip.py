"""``profan whatif --chip``: each GPU fixture projected onto the other chip and checked against
the OTHER real recording (H100 <-> H200), which the projection never reads."""

from __future__ import annotations

import json
from functools import cache

import pytest

from profan.report.analysis.pipeline import report_for, resolve_layout
from profan.report.model import Report
from profan.whatif.fit import launches
from profan.whatif.project import Projection, project_chip
from tests.conftest import FIXTURES_DIR

CHIP = {"": "h100", "_h200": "h200"}
DIRECTIONS = [("", "_h200"), ("_h200", "")]
TRAIN_STEPS = ("gpu_transformer", "gpu_transformer_nocb")


@cache
def _report(folder: str, chip: str | None = None) -> Report:
    trace, hlo = resolve_layout(FIXTURES_DIR / folder, None)
    return report_for(trace, hlo=hlo, chip=chip)


@cache
def _projected(group: str, src: str, tgt: str) -> Projection:
    return project_chip(_report(group + src), _report(group + src, CHIP[tgt]))


@pytest.mark.parametrize(("src", "tgt"), DIRECTIONS)
@pytest.mark.parametrize("group", TRAIN_STEPS)
def test_train_step_within_10_percent(group: str, src: str, tgt: str) -> None:
    projection = _projected(group, src, tgt)
    measured = _report(group + tgt).summary.step_time_median_s
    assert projection.target_chip == CHIP[tgt]
    assert abs(projection.projected_step_s / measured - 1) < 0.10
    assert projection.step_low_s < projection.projected_step_s < projection.step_high_s
    # the device's busy time moves the way the chip moves it (a host-paced step may not)
    assert (projection.projected_busy_s < projection.busy_s) == (tgt == "_h200")


# The one op over 1% of a step that misses 15%, and why: the target's autotuner chose another
# kernel for it, which a projection from the source's kernel cannot know. The test checks that
# the kernels differ (launch grid, block or shared memory), so the exception names its cause.
OTHER_KERNEL = {
    # Triton gemm, 1.1% of the step: the H200 ran it with 65,568 B of shared memory per block
    # (fewer pipeline stages) where the H100 used 98,328 B: 17% faster at the same FLOPs
    # (+19% projected); the same op in gpu_transformer ran one config on both chips (within 12%)
    ("gpu_transformer_nocb", "", "gemm_fusion_dot.10"),
}


@pytest.mark.parametrize(("src", "tgt"), DIRECTIONS)
@pytest.mark.parametrize("group", TRAIN_STEPS)
def test_ops_above_one_percent_within_15_percent(group: str, src: str, tgt: str) -> None:
    """Ops over 1% of the step, paired by key with the same FLOPs and bytes on the other chip
    (XLA fused some ops differently per chip: a renamed op is a different op)."""
    projection = _projected(group, src, tgt)
    measured = {e.key: e for e in _report(group + tgt).ops}
    per_step = projection.devices * projection.steps
    source = {e.key: e for e in _report(group + src).ops}
    checked, off = 0, []
    for op in projection.ops:
        other, mine = measured.get(op.key), source[op.key]
        if other is None or op.measured_s / per_step < 0.01 * projection.step_s:
            continue
        if other.flops != mine.flops or other.hbm_bytes != mine.hbm_bytes:
            continue
        checked += 1
        error = (op.projected_s / op.executions) / (other.measured_s / other.occurrences) - 1
        if (group, src, op.name) in OTHER_KERNEL:
            assert launches(mine) != launches(other), op.name
            assert abs(error) < 0.20, op.name
            continue
        if abs(error) >= 0.15:
            off.append((op.name, round(error, 3)))
    assert checked >= 15
    assert not off


@pytest.mark.parametrize(("src", "tgt"), DIRECTIONS)
def test_each_kernel_program_within_15_percent(src: str, tgt: str) -> None:
    projection = _projected("gpu_kernels", src, tgt)
    target = _report("gpu_kernels" + tgt)
    per = max(target.summary.device_count, 1) * max(target.summary.step_count, 1)
    measured: dict[str, float] = {}
    for entry in target.ops:
        measured[entry.module] = measured.get(entry.module, 0.0) + entry.measured_s / per
    assert len(projection.programs) >= 15
    off = {
        module: round(projected / measured[module] - 1, 3)
        for module, (_, projected) in projection.programs.items()
        if abs(projected / measured[module] - 1) >= 0.15
    }
    assert not off  # the smallest (FFTs, the batched matmul: 6-11 us a step) included


def test_memory_bound_ops_gain_less_than_the_bandwidth_ratio() -> None:
    projection = _projected("gpu_transformer", "", "_h200")
    hbm = [op for op in projection.ops if op.source_bound == "hbm" and op.measured_s > 1e-4]
    assert hbm
    for op in hbm:
        assert 1.0 < op.measured_s / op.projected_s < 4.8 / 3.35


def test_cli_formats(tmp_path, capsys) -> None:
    from profan.cli import main

    folder = str(FIXTURES_DIR / "gpu_transformer")
    assert main(["whatif", folder, "--chip", "h200", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["target_chip"] == "h200" and data["ops"][0]["rests_on"]
    assert data["parameters"]["sustained"]["h200"]["hbm"] < 1
    for fmt, marker in (("term", "ops that change bound"), ("md", "| op |"), ("html", "<table")):
        assert main(["whatif", folder, "--chip", "h200", "--format", fmt]) == 0
        assert marker in capsys.readouterr().out
