"""Megacore (TPU v4, v5p): a trace that accounts per TensorCore is scored as one core's share of
each op against one core's peaks, and the summary says which accounting it used.

Synthetic profiles (no v5p trace is at hand): an XLA-printed-style module with a dot and a
Pallas kernel profan cannot cost, with the per-op stats XProf would write per chip or per core.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from profan.chips import get_chip
from profan.cost import CostModel
from profan.hlo.parser import parse_module
from profan.roofline import score
from profan.roofline.megacore import Accounting
from profan.trace.profile import OP_COLUMNS, DeviceInfo, Profile
from profan.xprof import op_for_line, op_module, read_op_profile
from tests.test_cost_tpu_golden import DEV_HALF, GOLDEN, read_hlo_stats

MODULE = """HloModule synthetic_megacore

ENTRY %main (a: bf16[4096,8192], b: bf16[8192,4096]) -> (bf16[4096,4096], bf16[4096,4096]) {
  %a = bf16[4096,8192]{1,0} parameter(0)
  %b = bf16[8192,4096]{1,0} parameter(1)
  %dot = bf16[4096,4096]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %k = bf16[4096,4096]{1,0} custom-call(%dot), custom_call_target="tpu_custom_call"
  ROOT %t = (bf16[4096,4096]{1,0}, bf16[4096,4096]{1,0}) tuple(%dot, %k)
}
"""
DOT_FLOPS = 2 * 4096 * 4096 * 8192
DOT_BYTES = (4096 * 8192 + 8192 * 4096 + 4096 * 4096) * 2
KERNEL_FLOPS = 3.0e9  # what the trace says the kernel does (per the trace's accounting)


def _profile(share: float) -> Profile:
    """Two devices (chips) running the module once; trace figures = ``share`` of the chip's."""
    module = parse_module(MODULE)
    rows = []
    for device in (0, 1):
        for name, start, duration, flops, nbytes in (
            ("dot", 0.0, 4e-4, DOT_FLOPS * share, DOT_BYTES * share),
            ("k", 4e-4, 1e-4, KERNEL_FLOPS, 4096 * 4096 * 2 * 2 * share),
        ):
            row = dict.fromkeys(OP_COLUMNS)
            row.update(host="h", device=device, device_kind="TPU", module=module.name,
                       module_key="m", program_id=1, op_name=name, step=0, start_s=start,
                       duration_s=duration, trace_flops=flops, trace_bytes_accessed=nbytes,
                       trace_model_flops=math.nan, source=None, matched=True)  # fmt: skip
            rows.append(row)
    return Profile(
        path="synthetic", run=None, ops=pd.DataFrame(rows),
        steps=pd.DataFrame({"step": [0], "start_s": [0.0], "end_s": [5e-4],
                            "duration_s": [5e-4]}),
        device=DeviceInfo(kind="TPU", type_string="TPU v5", count=2), modules={"m": module},
    )  # fmt: skip


def test_synthetic_per_tensorcore_trace_is_scored_per_core() -> None:
    result = score(_profile(share=0.5))
    v5p = get_chip("tpu-v5p")
    assert result.summary.accounting == "per-TensorCore"
    assert "1/2" in result.summary.accounting_note
    assert result.chip.peak_flops["bf16"] == v5p.peak_flops["bf16"] / 2
    ops = {op.name: op for op in result.ops}
    dot = ops["dot"]
    assert dot.flops == DOT_FLOPS / 2 * 2  # one core's share, two executions
    assert dot.hbm_bytes == DOT_BYTES / 2 * 2
    # the same ideal time as the whole op on the whole chip
    assert dot.t_compute_s == pytest.approx(2 * DOT_FLOPS / v5p.peak_flops["bf16"], rel=1e-12)
    assert dot.flops_source == "hlo" and "more than 2x" not in dot.derivation
    # the kernel profan cannot cost takes the trace's per-core figure, against a core's peak
    kernel = ops["k"]
    assert kernel.flops_source == "trace" and kernel.flops == 2 * KERNEL_FLOPS
    assert kernel.t_compute_s == pytest.approx(
        2 * KERNEL_FLOPS / (v5p.peak_flops["bf16"] / 2), rel=1e-12
    )


def test_synthetic_per_chip_trace_is_scored_per_chip() -> None:
    result = score(_profile(share=1.0))
    v5p = get_chip("tpu-v5p")
    assert result.summary.accounting == "per-chip"
    assert result.chip.peak_flops["bf16"] == v5p.peak_flops["bf16"]
    dot = next(op for op in result.ops if op.name == "dot")
    assert dot.flops == DOT_FLOPS * 2
    assert dot.t_compute_s == pytest.approx(2 * DOT_FLOPS / v5p.peak_flops["bf16"], rel=1e-12)


def test_a_chip_that_is_not_megacore_keeps_the_chip_accounting() -> None:
    profile = _profile(share=0.5)
    profile.device = DeviceInfo(kind="TPU", type_string="TPU v6 lite", count=2)
    result = score(profile)
    assert result.summary.accounting == "per-chip" and result.summary.accounting_note is None


def test_a_cores_share_divides_the_bytes_of_every_memory_space(corpus_dir: Path) -> None:
    # a convolution fusion of the golden v5p step whose weights were prefetched into VMEM: one
    # TensorCore's share halves its HBM and its VMEM bytes alike
    profile = read_op_profile(corpus_dir / GOLDEN / "op_profile.expressions.json.gz")
    row = next(
        r for r in read_hlo_stats(corpus_dir / GOLDEN / DEV_HALF)
        if r.name == "fusion.678"
    )  # fmt: skip
    program = next(p for p in profile.programs if p.program_id == row.program_id)
    module = op_module(op_for_line(program, row.line), row.line)
    whole = CostModel(module).estimate(module.entry.root)
    share = Accounting(True, 2, "").share(CostModel(module).estimate(module.entry.root))
    assert set(whole.bytes_by_space) == {"hbm", "vmem"}
    for space, moved in whole.bytes_by_space.items():
        assert share.bytes_by_space[space] == moved / 2
    # XProf's figures are one core's: its two columns are this share's HBM and all-space bytes
    assert share.roofline_bytes == pytest.approx(row.hbm_bytes, rel=1e-6)
    assert share.all_space_bytes == pytest.approx(row.all_space_bytes, rel=1e-6)
