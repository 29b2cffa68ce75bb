"""Whole-profile figures of a report: steps, time by category and bound, overlap, idle time.

Everything here is per device (the totals over devices divided by the device count) unless a
name says otherwise; SCHEMA.md documents each figure.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from profan.report.analysis import timeline
from profan.report.model import IdleGap, OpEntry, Scalar, StepRow, StepScore, Summary
from profan.roofline import BOUNDS, OpRecord, StepRecord
from profan.trace.profile import OP_IDENTITY, row_groups

# Categories whose events count as "compute" that can hide communication.  ``control`` (while,
# conditional, call) is left out because its event encloses the ops it runs.
COMPUTE_CATEGORIES = frozenset(
    {"matmul", "elementwise", "reduction", "data-movement", "custom", "other"}
)


def _program_key(values: pd.Series) -> pd.Series:
    """Module keys as plain strings, ``""`` where the module is unknown (as the scorer keys)."""
    return values.astype(object).where(values.notna(), "").astype(str)


def op_identity(ops: pd.DataFrame, name_column: str) -> pd.DataFrame:
    """(module, program, op name) of each row: what tells one HLO op from another, also when
    several programs share a module name (``jit_matmul(19)`` and ``jit_matmul(73)``)."""
    return pd.DataFrame(
        {
            "module": ops["module"].astype(str).to_numpy(),
            "program": _program_key(ops["module_key"]).to_numpy(),
            "name": ops[name_column].astype(str).to_numpy(),
        }
    )


def op_groups(
    ops: pd.DataFrame, groups: tuple[np.ndarray, np.ndarray] | None = None
) -> tuple[np.ndarray, pd.DataFrame]:
    """Each event's op (a group id per row) and the (module, program, name) of every op: events
    are many, ops few, so identities are built once per op, not per event.  ``groups``: the
    frame's ``row_groups(ops, OP_IDENTITY)`` where the caller has them (``Profile.op_groups``)."""
    # numbered in order of first appearance
    group_of, first_rows = groups if groups is not None else row_groups(ops, OP_IDENTITY)
    return group_of, op_identity(ops.iloc[first_rows], "op_name")


@dataclass(frozen=True, slots=True)
class OpCategories:
    """Each event's op (``of_row``, see ``op_groups``) and, per op, its (module, program, name)
    and category: events are many, ops few."""

    of_row: np.ndarray
    identities: pd.DataFrame
    categories: np.ndarray  # object: its record's category, ``unmatched`` where it has none


def op_categories(
    ops: pd.DataFrame,
    scored: Sequence[OpRecord],
    groups: tuple[np.ndarray, np.ndarray] | None = None,
) -> OpCategories:
    """The ops of a profile's op table with their categories from the scored ops' records
    (``groups``: as ``op_groups`` takes them)."""
    category_of: dict[tuple[str, str, str], str] = {}
    for op in scored:  # the first record of an identity, as a merge keeps it
        category_of.setdefault((op.module, op.module_key or "", op.name), op.category)
    group_of, identities = op_groups(ops, groups)
    categories = [
        category_of.get(identity, "unmatched")
        for identity in zip(
            identities["module"], identities["program"], identities["name"], strict=True
        )
    ]
    return OpCategories(group_of, identities, np.array(categories, dtype=object))


@dataclass(frozen=True, slots=True)
class BusyTime:
    """The scorer's split of each device's busy span (per device, overlapping ops sharing each
    instant): by category and by bound, plus idle, each summing to the span."""

    span_s: float
    idle_s: float
    by_category_s: dict[str, float]
    by_bound_s: dict[str, float]


@dataclass(slots=True)
class Overlap:
    """What the timelines say: per-op exposed time and per-device busy/idle/communication."""

    # (module, program, op name) -> exposed seconds, all devices
    exposed_by_op: dict[tuple[str, str, str], float]
    exposed_comm_s: float  # per device, whole profile
    collective_s: float  # per device, whole profile
    top_gaps: list[IdleGap]


def overlap(
    ops: pd.DataFrame,
    scored: Sequence[OpRecord],
    op_rows: tuple[np.ndarray, np.ndarray] | None = None,
) -> Overlap:
    """Collective and host time not hidden behind compute on the same device, and the longest
    idle gaps (each event's category is its op's record's in ``scored``; ``op_rows``: as
    ``op_groups`` takes them)."""
    if len(ops) == 0:
        return Overlap({}, 0.0, 0.0, [])
    groups = op_categories(ops, scored, op_rows)
    start = ops["start_s"].to_numpy(dtype=float)
    end = start + ops["duration_s"].to_numpy(dtype=float)
    device = ops["device"].fillna(-1).to_numpy(dtype=np.int64)
    # one timeline per (host, device): hosts may each number their devices from 0
    host_code = (
        pd.factorize(ops["host"])[0].astype(np.int64)
        if "host" in ops
        else np.zeros(len(ops), np.int64)
    )
    timeline_of = host_code * (int(device.max()) + 2) + (device + 1)
    # each test once per op, then per event by its op
    group_of, identities, categories = groups.of_row, groups.identities, groups.categories
    is_compute = np.isin(categories, list(COMPUTE_CATEGORIES))[group_of]
    is_hidden_candidate = np.isin(categories, ["collective", "host"])[group_of]
    is_collective = (categories == "collective")[group_of]
    exposed = np.zeros(len(ops))
    comm_total = 0.0
    all_gaps: list[timeline.Gap] = []
    # each timeline's events, in row order, by one stable sort of the timeline numbers (few
    # and small: as 16-bit numbers, numpy sorts them by radix, 5x faster)
    if timeline_of.max() < np.iinfo(np.int16).max:
        timeline_of = timeline_of.astype(np.int16)
    order = np.argsort(timeline_of, kind="stable")
    bounds = np.flatnonzero(np.diff(timeline_of[order])) + 1
    lines = np.split(order, bounds)
    for members in lines:
        dev = device[members[0]]
        computing = members[is_compute[members]]
        compute = timeline.union(start[computing], end[computing])
        candidates = members[is_hidden_candidate[members]]
        if len(candidates):
            covered = timeline.overlap(compute, start[candidates], end[candidates])
            exposed[candidates] = np.maximum((end[candidates] - start[candidates]) - covered, 0.0)
        busy = timeline.union(start[members], end[members])
        all_gaps.extend(timeline.gaps(busy, int(dev), largest=5))
        mine = members[is_collective[members]]
        comm_total += float((end[mine] - start[mine]).sum())
    n = max(len(lines), 1)
    # Exposed time per op identity, summed over its events in row order; built per op (few),
    # not per event (many).
    keys = list(zip(identities["module"], identities["program"], identities["name"], strict=True))
    identity_of_group, unique_keys = pd.factorize(pd.Series(keys, dtype=object))
    hidden = pd.Series(exposed[is_hidden_candidate])
    sums = hidden.groupby(identity_of_group[group_of[is_hidden_candidate]]).sum()
    exposed_by_op = dict(sorted((_identity(unique_keys[i]), float(v)) for i, v in sums.items()))
    all_gaps.sort(key=lambda g: -g.duration_s)
    top = [IdleGap(g.device, g.start_s, g.duration_s) for g in all_gaps[:5]]
    comm_exposed = float(exposed[is_collective].sum())
    return Overlap(exposed_by_op, comm_exposed / n, comm_total / n, top)


def _identity(key: Any) -> tuple[str, str, str]:
    """One (module, program, op name) key of the factorized identities, as text."""
    module, program, name = key
    return str(module), str(program), str(name)


def _number(value: Any, default: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def steps(profile_steps: pd.DataFrame | None, score_steps: Sequence[StepRecord]) -> list[StepRow]:
    """One row per step: start/end and the trace's window (``window_s``) from the profile, then
    the scorer's per-step figures; ``measured_s`` is the scorer's (what its ideal is compared
    with: the step's own ops' span, never less than the window), else the window."""
    rows: dict[int, StepRow] = {}
    if profile_steps is not None and len(profile_steps):
        for record in profile_steps.to_dict("records"):
            step = int(record["step"])
            window = _number(record.get("duration_s"))
            rows[step] = StepRow(
                step=step,
                start_s=_number(record.get("start_s")),
                end_s=_number(record.get("end_s")),
                measured_s=window,
                window_s=window,
            )
    for record in score_steps:
        row = rows.setdefault(record.step, StepRow(step=record.step))
        row.measured_s = record.measured_s
        if row.window_s is None:
            row.window_s = record.window_s
        row.score = StepScore(**{name: getattr(record, name) for name in _SCORE_FIELDS})
    return [rows[k] for k in sorted(rows)]


# The scorer's step figures kept in ``StepRow.score`` (a ``StepRecord``'s, less its step, measured
# and window: the row's own).
_SCORE_FIELDS = tuple(f.name for f in dataclasses.fields(StepScore))


def summarise(
    *,
    ops: list[OpEntry],
    steps: list[StepRow],
    facts: Overlap,
    busy: BusyTime,
    total_event_time_s: float,
    unmatched_event_time_s: float,
    device_count: int,
    scorer: dict[str, Scalar],
) -> Summary:
    """The summary figures (before the rules ran: ``findings`` stays None).  Step time
    statistics are over the trace's step windows (what the profiler recorded as the step).
    ``unmatched_event_time_s``: the op events joined to no HLO instruction (they have rows in
    ``ops`` too, cost unknown, so the ops' sum cannot tell them apart)."""
    windows = [s.measured_s if s.window_s is None else s.window_s for s in steps]
    step_times = np.array([w for w in windows if w], dtype=float)
    devices = max(device_count, 1)
    time_by_bound = {**dict.fromkeys(BOUNDS, 0.0), **busy.by_bound_s, "idle": busy.idle_s}
    gaps = [steps[i + 1].start_s - steps[i].end_s for i in range(len(steps) - 1)]
    gaps = [g for g in gaps if g > 0]
    have_steps = len(step_times) > 0
    return Summary(
        step_count=len(steps),
        step_time_median_s=float(np.median(step_times)) if have_steps else None,
        step_time_min_s=float(step_times.min()) if have_steps else None,
        step_time_max_s=float(step_times.max()) if have_steps else None,
        step_time_p10_s=float(np.percentile(step_times, 10)) if have_steps else None,
        step_time_p90_s=float(np.percentile(step_times, 90)) if have_steps else None,
        mfu=_optional(scorer.get("mfu")),
        total_op_time_s=total_event_time_s,
        matched_op_time_s=total_event_time_s - unmatched_event_time_s,
        unmatched_op_time_s=unmatched_event_time_s,
        op_count=len(ops),
        device_count=devices,
        time_by_category_s=dict(sorted(busy.by_category_s.items(), key=lambda kv: -kv[1])),
        time_by_bound_s=time_by_bound,
        collective_time_s=facts.collective_s,
        exposed_comm_s=facts.exposed_comm_s,
        exposed_comm_per_step_s=facts.exposed_comm_s / len(steps) if steps else None,
        exposed_comm_share=facts.exposed_comm_s / busy.span_s if busy.span_s > 0 else 0.0,
        busy_span_s=busy.span_s,
        idle_s=busy.idle_s,
        idle_gaps=facts.top_gaps,
        inter_step_gap_total_s=float(sum(gaps)),
        inter_step_gap_max_s=float(max(gaps)) if gaps else 0.0,
        ideal_time_s=sum(op.roofline_s for op in ops) / devices,
        scorer={k: v for k, v in scorer.items() if k != "mfu"},
    )


def _optional(value: Any) -> float | None:
    number = _number(value, math.nan)
    return number if math.isfinite(number) else None
