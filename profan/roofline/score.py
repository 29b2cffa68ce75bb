"""``score(profile, chip, *, shardings)``: every op and every step of a loaded profile against the
chip's roofline, and a typed summary of the whole."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from profan.beside import Beside
from profan.chips import Chip, chip_for_device, get_chip
from profan.roofline.checks import explain_faster_executions
from profan.roofline.megacore import trace_accounting
from profan.roofline.ops import OpRecord, op_records
from profan.roofline.scoring import ModuleScoring
from profan.roofline.spans import device_keys, event_rows
from profan.roofline.steps import MFU_PEAK_DTYPE, StepRecord, step_rows
from profan.roofline.timeline import TimeBreakdown, time_breakdown

if TYPE_CHECKING:
    from profan.sharding import ShardingReport
    from profan.trace.profile import Profile


@dataclass(slots=True)
class Summary:
    """The whole profile against the roofline.

    ``measured_s``/``roofline_s``/``efficiency`` compare synchronous ops only (an async op's
    measured time is just its exposed wait).  ``mfu`` is the mean over steps of each step's FLOPs
    over all its devices / (the chip's dense ``mfu_peak_dtype`` peak per device x step time x
    devices): the one definition of MFU in profan.  Step fields are ``None`` without steps.
    """

    chip: str
    chip_display_name: str
    figure_sources: dict[str, str]
    peak_flops_per_s: float
    hbm_bytes_per_s: float
    ops: int
    op_executions: int
    measured_s: float
    roofline_s: float
    efficiency: float
    flops: float
    share_by_bound: dict[str, float]
    unknown_cost_ops: list[str]
    unmatched_events: int
    mfu_peak_dtype: str
    mfu_peak_source: str
    # each device's busy span split by op category and by bound, plus idle (sums to the span);
    # means over the devices that ran ops (profan.roofline.timeline)
    busy_span_s: float
    idle_s: float
    time_by_category_s: dict[str, float]
    time_by_bound_s: dict[str, float]
    # how the trace accounts an op's work: "per-chip", or "per-TensorCore" on megacore chips
    # (TPU v4, v5p; then figures are one core's share and peaks one core's) — and why
    accounting: str = "per-chip"
    accounting_note: str | None = None
    steps: int | None = None
    step_measured_s: float | None = None
    step_ideal_s: float | None = None
    mfu: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Score:
    """A profile scored against a chip's roofline: its ops, longest measured time first, and
    its steps."""

    ops: list[OpRecord]
    steps: list[StepRecord]
    chip: Chip
    summary: Summary
    notes: list[str] = field(default_factory=list)


def resolve_chip(chip: Chip | str | None, profile: Profile | None = None) -> Chip:
    if isinstance(chip, Chip):
        return chip
    if profile is not None:
        return chip_for_device(profile.device, override=chip)
    if chip is None:
        raise ValueError("a chip is needed to score a module without a trace")
    return get_chip(chip)


def _summary(
    profile: Profile,
    chip: Chip,
    ops: list[OpRecord],
    steps: list[StepRecord],
    breakdown: TimeBreakdown,
) -> Summary:
    # Async transfers overlap other work (their measured time is only the exposed wait), so the
    # overall efficiency compares synchronous ops only.  (numpy's sums and pandas' grouped ones,
    # as the figures have always been summed: the same floats to the last bit.)
    synchronous = [op for op in ops if op.async_role is None]
    measured = float(np.array([op.measured_s for op in synchronous], dtype=float).sum())
    roofline = float(np.array([op.roofline_s for op in synchronous], dtype=float).sum())
    table = pd.DataFrame(
        {"bound_by": [op.bound_by for op in ops], "measured_s": [op.measured_s for op in ops]}
    )
    by_bound = table.groupby("bound_by")["measured_s"].sum()
    all_measured = float(table["measured_s"].sum())
    summary = Summary(
        chip=chip.name,
        chip_display_name=chip.display_name,
        figure_sources=dict(chip.figure_sources),
        peak_flops_per_s=chip.device_peak_flops("bf16"),
        hbm_bytes_per_s=chip.device_hbm_bytes_per_s,
        ops=len(ops),
        op_executions=sum(op.occurrences for op in ops),
        measured_s=measured,
        roofline_s=roofline,
        efficiency=roofline / measured if measured > 0 else math.nan,
        flops=float(np.array([op.flops or 0.0 for op in ops], dtype=float).sum()),
        share_by_bound={
            str(b): float(t) / all_measured if all_measured else 0.0 for b, t in by_bound.items()
        },
        unknown_cost_ops=[op.name for op in ops if op.cost_source == "none"],
        unmatched_events=sum(u.count for u in profile.unmatched),
        mfu_peak_dtype=MFU_PEAK_DTYPE,
        mfu_peak_source=chip.device_peak_flops_source(MFU_PEAK_DTYPE),
        busy_span_s=breakdown.busy_span_s,
        idle_s=breakdown.idle_s,
        time_by_category_s=breakdown.by_category_s,
        time_by_bound_s=breakdown.by_bound_s,
    )
    if steps:  # (pandas' means: a step without an MFU is left out)
        summary.steps = len(steps)
        summary.step_measured_s = float(pd.Series([s.measured_s for s in steps]).mean())
        summary.step_ideal_s = float(pd.Series([s.ideal_s for s in steps]).mean())
        summary.mfu = float(pd.Series([s.mfu for s in steps], dtype=float).mean())
    return summary


def score(
    profile: Profile,
    chip: Chip | str | None = None,
    *,
    shardings: dict[str, ShardingReport] | None = None,
    scorings: dict[str, ModuleScoring] | None = None,
) -> Score:
    """Score every op of a loaded profile (aggregated over its executions) and every step.

    ``shardings``: module key -> ``profan.sharding.describe(module)`` (the pipeline describes
    each module once and passes it in); collectives are timed over the mesh axes the analysis
    found.  Without it nothing is inferred: the axes are those their device groups span.
    ``scorings``: module key -> its ``ModuleScoring``, prepared while the trace was read.
    """
    catalogue_chip = resolve_chip(chip, profile)
    accounting = trace_accounting(profile, catalogue_chip)
    chip = accounting.scoring_chip(catalogue_chip)
    ops = op_records(profile, chip, shardings, accounting, scorings)
    ops.sort(key=lambda op: -op.measured_s)  # longest first; stable: ties keep their order
    rows = event_rows(profile, ops)
    ops = explain_faster_executions(profile, ops, chip, rows)
    devices = device_keys(profile.ops)  # which device each op ran on, for both
    # two passes over every execution, read-only on the same inputs: side by side
    steps_beside = Beside(step_rows, profile, chip, ops, rows, devices)
    breakdown = time_breakdown(profile, ops, rows, devices)
    steps = steps_beside.result()
    summary = _summary(profile, chip, ops, steps, breakdown)
    summary.accounting, summary.accounting_note = accounting.name, accounting.note or None
    return Score(ops=ops, steps=steps, chip=chip, summary=summary)
