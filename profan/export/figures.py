"""profan's verdict on every op execution of a profile, in the form both exports write.

One ``OpFigures`` per scored op (``Score.ops``: an op of a program) is its ``OpRecord`` and the
report's flags, and gives what is the same for all its executions from them — ideal time, FLOPs
and bytes per execution, the op's efficiency (category, bound, source and the figures' sources
are the record's own); ``Figures`` adds, per row of
``Profile.ops`` (an execution), which op it is and that execution's own efficiency (its ideal
time over its measured time).  A figure profan does not know is ``None`` and is written as
``"unknown"``, never as a number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from profan.report.analysis.build import Analysis
from profan.report.model import Report
from profan.roofline.ops import OpRecord
from profan.roofline.spans import event_rows, span_rows

UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class OpFigures:
    """profan's figures for one op: its scored record (totals over its executions) and the
    flags the report's rules gave it; the per-execution figures both exports write are derived
    from the record here, where a figure of unknown source is ``None``."""

    record: OpRecord
    flags: tuple[str, ...]  # the rules that flagged it (``profan report``'s findings)

    @property
    def _executions(self) -> int:
        return max(self.record.occurrences, 1)

    @property
    def ideal_s(self) -> float | None:
        """The roofline time of one execution; None when its cost is unknown."""
        record = self.record
        return record.roofline_s / self._executions if record.bound_by != UNKNOWN else None

    @property
    def efficiency(self) -> float | None:
        """The op's, over all its executions (as the report prints it)."""
        return self.record.efficiency if self.record.bound_by != UNKNOWN else None

    @property
    def flops(self) -> float | None:
        """FLOPs of one execution."""
        record = self.record
        if record.flops is None or record.flops_source == UNKNOWN:
            return None
        return record.flops / self._executions

    @property
    def hbm_bytes(self) -> float | None:
        """HBM bytes of one execution."""
        record = self.record
        return record.hbm_bytes / self._executions if record.bytes_source != UNKNOWN else None

    @property
    def asynchronous(self) -> bool:
        """An async start or done: its measured time is only the wait."""
        return self.record.async_role is not None

    @property
    def transfer_span_s(self) -> float | None:
        """An async done's mean start-to-done span (None where the trace records none), against
        which ``efficiency`` is ``ideal_s`` over it."""
        return _per(self.record.async_span_s, self.record.async_span_n)

    @property
    def exposed_wait_s(self) -> float | None:
        """An async done's mean exposed wait (None for other ops)."""
        return _per(self.record.exposed_wait_s, self._executions)

    @property
    def flag_text(self) -> str:
        return ",".join(self.flags) if self.flags else "none"


@dataclass(slots=True)
class Figures:
    """The figures of every op, and which op each execution of ``Profile.ops`` is."""

    ops: list[OpFigures]
    row_op: np.ndarray  # per row of Profile.ops: index into ``ops`` (-1 where none)
    duration_s: np.ndarray  # per row of Profile.ops: its measured time

    def execution_efficiency(self, row: int) -> float | None:
        """One execution's ideal time over its measured time; an async op's (whose measured
        time is only its wait) is the op's own, over its start-to-done spans."""
        op_index = int(self.row_op[row])
        if op_index < 0:
            return None
        op = self.ops[op_index]
        if op.asynchronous or op.ideal_s is None:
            return op.efficiency
        measured = float(self.duration_s[row])
        return op.ideal_s / measured if measured > 0 else None

    def execution_efficiencies(self, spans: bool = False) -> np.ndarray:
        """``execution_efficiency`` of every row at once (NaN where unknown).  ``spans``: the
        rows are async spans (start to done), whose own time is the transfer's: each is its
        op's ideal time over the span."""
        ideal = np.array([_nan(op.ideal_s) for op in self.ops] + [math.nan])
        own = np.array([_nan(op.efficiency) for op in self.ops] + [math.nan])
        by_op = np.array(
            [(op.asynchronous and not spans) or op.ideal_s is None for op in self.ops] + [True]
        )
        index = np.where(self.row_op >= 0, self.row_op, len(self.ops))
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(self.duration_s > 0, ideal[index] / self.duration_s, math.nan)
        return np.where(by_op[index], own[index], ratio)


def _nan(value: float | None) -> float:
    return math.nan if value is None else value


def _per(total: float | None, count: int | None) -> float | None:
    """A total over ``count`` executions, per execution (None where either is unknown)."""
    return total / count if total is not None and count else None


def span_figures(analysis: Analysis, figures: Figures) -> Figures | None:
    """The same ops' figures for the rows of ``Profile.async_ops`` (a TPU's async spans, each
    the op of its done), or None when the profile has none."""
    spans = analysis.profile.async_ops
    if spans is None or not len(spans):
        return None
    return Figures(
        ops=figures.ops,
        row_op=span_rows(analysis.profile, analysis.score.ops),
        duration_s=spans["duration_s"].to_numpy(dtype=float),
    )


def figures_of(analysis: Analysis, report: Report) -> Figures:
    """Every op's figures from its scored record, with the flags of the report's rules."""
    scored = analysis.score.ops
    flags = {(entry.module, entry.program or "", entry.name): entry.flags for entry in report.ops}
    ops = [
        OpFigures(
            record, tuple(flags.get((record.module, record.module_key or "", record.name), ()))
        )
        for record in scored
    ]
    return Figures(
        ops=ops,
        row_op=event_rows(analysis.profile, scored),
        duration_s=analysis.profile.ops["duration_s"].to_numpy(dtype=float),
    )


# Names of the figures as both exports write them (XStat names in the xplane, args in JSON).
EFFICIENCY = "profan_efficiency"  # this execution's: its ideal time over its measured time


def op_args(op: OpFigures) -> list[tuple[str, float | str]]:
    """The figures that are the same for every execution of ``op``, in the order they are
    shown; an unknown figure is the text ``unknown``."""
    args: list[tuple[str, float | str]] = [
        ("profan_op", op.record.name),
        ("profan_category", op.record.category),
        ("profan_bound", op.record.bound_by),
        ("profan_ideal_us", UNKNOWN if op.ideal_s is None else op.ideal_s * 1e6),
        ("profan_op_efficiency", UNKNOWN if op.efficiency is None else op.efficiency),
    ]
    if op.exposed_wait_s is not None:  # an async done: its efficiency is its transfer's
        span = op.transfer_span_s
        args.append(("profan_transfer_span_us", UNKNOWN if span is None else span * 1e6))
        args.append(("profan_exposed_wait_us", op.exposed_wait_s * 1e6))
    args += [
        ("profan_flags", op.flag_text),
        ("profan_source", op.record.source or UNKNOWN),
        ("profan_flops", UNKNOWN if op.flops is None else op.flops),
        ("profan_flops_source", op.record.flops_source),
        ("profan_hbm_bytes", UNKNOWN if op.hbm_bytes is None else op.hbm_bytes),
        ("profan_bytes_source", op.record.bytes_source),
    ]
    if op.record.note:
        args.append(("profan_note", op.record.note))
    return args
