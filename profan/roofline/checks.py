"""Op executions measured faster than their roofline, counted per op and explained in words.

A roofline is a lower bound: an execution shorter than its op's ideal time means the model
charged work the hardware did not do (data still in on-chip cache, a link faster than the chip's
figure) or the trace recorded the execution shorter than it ran (zero-length or split events).
An async ``-done`` event is only the exposed wait for its transfer, never the transfer: its
executions here are its start-to-done spans (``spans.span_rows``), and a done without spans
has none (a wait shorter than the transfer's ideal is no contradiction).  Such ops keep their
figures, and their records (``Score.ops``) say how many executions beat the model
(``faster_executions``) and why (``note``), so no number above 100% goes unexplained.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from profan.chips import Chip
from profan.roofline.ops import OpRecord
from profan.roofline.spans import span_rows
from profan.units import percent, seconds

if TYPE_CHECKING:
    from profan.trace.profile import Profile

_TOLERANCE = 1e-9  # relative: an execution as long as its ideal is not faster


def _why(bound: str, async_role: object, shortest_s: float, chip: Chip) -> str:
    if async_role == "done":
        if shortest_s <= 0:
            return "the trace's async line recorded zero-length spans for it"
        return (
            f"its {bound} link moved the bytes faster than the chip's figure for that link "
            "(`profan chips` says where the figure comes from), the transfer moved fewer "
            "bytes than its shape holds, or the async line recorded a span shorter than its "
            "transfer ran (events cut short)"
        )
    if shortest_s <= 0:
        return "the trace recorded zero-length events for it (truncated or split events)"
    if bound == "hbm":
        cache = "L2 cache" if chip.kind == "GPU" else "on-chip memory"
        return (
            f"it moved less from HBM than the model charges: its data was likely still in the "
            f"{cache} from the op before it (the model charges every byte to HBM), or the trace "
            "split an execution over several events"
        )
    if bound == "compute":
        return (
            "the trace splits an execution over several events (more events than the program "
            "ran it), or the op did less math than its shapes say"
        )
    if bound == "transcendental":
        return (
            "its transcendentals ran faster than the chip's transcendental rate (for most chips "
            "an estimate: `profan chips` says how it was derived), or it evaluated fewer than "
            "XLA counts (a value computed once and broadcast, random bits counted as "
            "transcendentals)"
        )
    return f"the model over-counts its {bound} term"


def explain_faster_executions(
    profile: Profile, ops: list[OpRecord], chip: Chip, rows: np.ndarray
) -> list[OpRecord]:
    """``ops`` with ``faster_executions`` (executions shorter than the op's ideal time; for
    an async done, its start-to-done spans shorter than its transfer's ideal) and a ``note`` in
    words for every op that has them or beats its roofline in total.  ``rows``: each
    execution's position in ``ops`` (``spans.event_rows``)."""
    ideal = np.array([op.roofline_s / max(op.occurrences, 1) for op in ops], dtype=float)
    is_done = np.array([op.async_role == "done" for op in ops] + [False], dtype=bool)
    known = (rows >= 0) & ~is_done[rows]  # a done's event is its wait, not its transfer
    duration = profile.ops["duration_s"].to_numpy(dtype=float)[known]
    which = rows[known]
    spans_at = span_rows(profile, ops)
    if spans_at.size and profile.async_ops is not None:
        spanned = spans_at >= 0
        span_durations = profile.async_ops["duration_s"].to_numpy(dtype=float)[spanned]
        duration = np.concatenate([duration, span_durations])
        which = np.concatenate([which, spans_at[spanned]])
    faster = ideal[which] > duration * (1 + _TOLERANCE)
    counts = np.bincount(which[faster], minlength=len(ops))
    shortest = np.full(len(ops), np.inf)
    np.minimum.at(shortest, which[faster], duration[faster])
    return [
        _explained(op, int(count), float(fastest), chip)
        for op, count, fastest in zip(ops, counts.tolist(), shortest.tolist(), strict=True)
    ]


def _explained(op: OpRecord, faster: int, shortest_s: float, chip: Chip) -> OpRecord:
    """``op`` with its count of faster executions (``shortest_s``: the shortest of them) and,
    where it has some or beats its roofline in total, the note that says why."""
    efficiency = op.efficiency
    beaten = efficiency is not None and efficiency > 1.0
    if not faster and not beaten:
        unchanged = op.faster_executions == 0 and op.note is None
        return op if unchanged else replace(op, faster_executions=0, note=None)
    per_execution = op.roofline_s / max(op.occurrences, 1)
    fastest = shortest_s if faster else op.measured_s / max(op.occurrences, 1)
    why = _why(op.bound_by, op.async_role, fastest, chip)
    if op.async_role == "done" and beaten:
        head = (
            "its start-to-done spans are shorter than its transfers' ideal "
            f"({percent(efficiency, 0)} of the ideal time)"
        )
    elif op.async_role == "done":
        head = (
            f"{faster} of {op.async_span_n} start-to-done spans shorter than its "
            f"transfer's ideal (shortest {seconds(fastest)}, ideal {seconds(per_execution)})"
        )
    elif beaten:
        head = f"measured faster than its roofline ({percent(efficiency, 0)} of the ideal time)"
    else:
        head = (
            f"{faster} of {op.occurrences} executions measured faster than its "
            f"roofline (shortest {seconds(fastest)}, ideal {seconds(per_execution)})"
        )
    return replace(op, faster_executions=faster, note=f"{head}: {why}")
