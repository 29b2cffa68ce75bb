"""profan's verdict on every op execution of a profile, in the form both exports write.

One ``OpFigures`` per scored op (``Score.ops``: an op of a program) holds what is the same for all
its executions — category, bound, ideal time per execution, the op's efficiency, flags, source,
FLOPs and bytes per execution with their sources; ``Figures`` adds, per row of
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
from profan.roofline.spans import event_rows, span_rows

UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class OpFigures:
    """profan's figures for one op; times, FLOPs and bytes are per execution."""

    name: str
    module: str
    category: str
    bound: str  # compute | hbm | ici | host | unknown
    ideal_s: float | None  # the roofline time of one execution; None when its cost is unknown
    efficiency: float | None  # the op's, over all its executions (as the report prints it)
    flags: tuple[str, ...]  # the rules that flagged it (``profan report``'s findings)
    source: str | None  # file:line
    flops: float | None
    flops_source: str
    hbm_bytes: float | None
    bytes_source: str
    asynchronous: bool  # an async start or done: its measured time is only the wait
    note: str | None  # why an op beat its roofline, how an async op was scored, …
    # async dones: one transfer's mean start-to-done span (None where the trace records none),
    # against which ``efficiency`` is ``ideal_s`` over it, and the done's mean exposed wait
    transfer_span_s: float | None = None
    exposed_wait_s: float | None = None

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
    ops = []
    for record in scored:
        occurrences = max(record.occurrences, 1)
        known = record.bound_by != UNKNOWN
        ops.append(
            OpFigures(
                name=record.name,
                module=record.module,
                category=record.category,
                bound=record.bound_by,
                ideal_s=record.roofline_s / occurrences if known else None,
                efficiency=record.efficiency if known else None,
                flags=tuple(flags.get((record.module, record.module_key or "", record.name), ())),
                source=record.source,
                flops=(
                    record.flops / occurrences
                    if record.flops is not None and record.flops_source != UNKNOWN
                    else None
                ),
                flops_source=record.flops_source,
                hbm_bytes=(
                    record.hbm_bytes / occurrences if record.bytes_source != UNKNOWN else None
                ),
                bytes_source=record.bytes_source,
                asynchronous=record.async_role is not None,
                note=record.note,
                transfer_span_s=_per(record.async_span_s, record.async_span_n),
                exposed_wait_s=_per(record.exposed_wait_s, occurrences),
            )
        )
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
        ("profan_op", op.name),
        ("profan_category", op.category),
        ("profan_bound", op.bound),
        ("profan_ideal_us", UNKNOWN if op.ideal_s is None else op.ideal_s * 1e6),
        ("profan_op_efficiency", UNKNOWN if op.efficiency is None else op.efficiency),
    ]
    if op.exposed_wait_s is not None:  # an async done: its efficiency is its transfer's
        span = op.transfer_span_s
        args.append(("profan_transfer_span_us", UNKNOWN if span is None else span * 1e6))
        args.append(("profan_exposed_wait_us", op.exposed_wait_s * 1e6))
    args += [
        ("profan_flags", op.flag_text),
        ("profan_source", op.source or UNKNOWN),
        ("profan_flops", UNKNOWN if op.flops is None else op.flops),
        ("profan_flops_source", op.flops_source),
        ("profan_hbm_bytes", UNKNOWN if op.hbm_bytes is None else op.hbm_bytes),
        ("profan_bytes_source", op.bytes_source),
    ]
    if op.note:
        args.append(("profan_note", op.note))
    return args
