"""Op executions measured faster than their roofline, counted per op and explained in words.

A roofline is a lower bound: an execution shorter than its op's ideal time means the model
charged work the hardware did not do (data still in on-chip cache, a link faster than the chip's
figure) or the trace recorded the execution shorter than it ran (zero-length or split events).
An async ``-done`` event is only the exposed wait for its transfer, never the transfer: its
executions here are its start-to-done spans (``spans.span_rows``), and a done without spans
has none (a wait shorter than the transfer's ideal is no contradiction).  Such ops keep their
figures, and ``Score.ops`` says how many executions beat the model (``faster_executions``) and
why (``note``), so no number above 100% goes unexplained.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profan.chips import Chip
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
    profile: Profile, per_op: pd.DataFrame, chip: Chip, rows: np.ndarray
) -> pd.DataFrame:
    """``per_op`` with ``faster_executions`` (executions shorter than the op's ideal time; for
    an async done, its start-to-done spans shorter than its transfer's ideal) and a ``note`` in
    words for every op that has them or beats its roofline in total.  ``rows``: each
    execution's row in ``per_op`` (``spans.event_rows``)."""
    occurrences = per_op["occurrences"].where(per_op["occurrences"] > 0, 1)
    ideal = (per_op["roofline_s"] / occurrences).to_numpy(dtype=float)
    is_done = np.append(per_op["async_role"].eq("done").fillna(False).to_numpy(dtype=bool), False)
    known = (rows >= 0) & ~is_done[rows]  # a done's event is its wait, not its transfer
    duration = profile.ops["duration_s"].to_numpy(dtype=float)[known]
    which = rows[known]
    spans_at = span_rows(profile, per_op)
    if spans_at.size and profile.async_ops is not None:
        spanned = spans_at >= 0
        span_durations = profile.async_ops["duration_s"].to_numpy(dtype=float)[spanned]
        duration = np.concatenate([duration, span_durations])
        which = np.concatenate([which, spans_at[spanned]])
    faster = ideal[which] > duration * (1 + _TOLERANCE)
    counts = np.bincount(which[faster], minlength=len(per_op))
    shortest = np.full(len(per_op), np.inf)
    np.minimum.at(shortest, which[faster], duration[faster])
    found = [
        None if counts[i] == 0 else {"size": int(counts[i]), "min": float(shortest[i])}
        for i in range(len(per_op))
    ]
    per_op = per_op.copy()
    per_op["faster_executions"] = pd.array(counts.astype(np.int64))
    notes: list[str | None] = []
    for row, hit in zip(per_op.itertuples(index=False), found, strict=True):
        efficiency = row.efficiency
        beaten = bool(efficiency > 1.0) if not pd.isna(efficiency) else False
        if hit is None and not beaten:
            notes.append(None)
            continue
        per_execution = row.roofline_s / max(row.occurrences, 1)
        fastest = float(hit["min"]) if hit is not None else row.measured_s / max(row.occurrences, 1)
        why = _why(row.bound_by, row.async_role, fastest, chip)
        if row.async_role == "done" and beaten:
            head = (
                "its start-to-done spans are shorter than its transfers' ideal "
                f"({percent(efficiency, 0)} of the ideal time)"
            )
        elif row.async_role == "done":
            assert hit is not None  # not beaten: it is here for its faster spans
            head = (
                f"{int(hit['size'])} of {row.async_span_n} start-to-done spans shorter than its "
                f"transfer's ideal (shortest {seconds(fastest)}, ideal {seconds(per_execution)})"
            )
        elif beaten:
            head = f"measured faster than its roofline ({percent(efficiency, 0)} of the ideal time)"
        else:
            assert hit is not None  # not beaten: it is here for its faster executions
            head = (
                f"{int(hit['size'])} of {row.occurrences} executions measured faster than its "
                f"roofline (shortest {seconds(fastest)}, ideal {seconds(per_execution)})"
            )
        notes.append(f"{head}: {why}")
    per_op["note"] = pd.Series(notes, index=per_op.index, dtype=object)
    per_op["faster_executions"] = per_op["faster_executions"].astype("Int64")
    return per_op
