"""Per step: the ideal step time against the measured one, MFU, and where the op time went.

Everything is per device and then the step's busiest device:

* ``measured_s``: the time the step's work took — the longest, over devices, of the span from
  its first op's start to its last op's end, and never less than the trace's step window
  (``window_s``: a step marker, or the dominant program's execution).  When the step's ops run
  past the window (steps from the dominant program: other programs' ops that follow it belong to
  its step), ``note`` says so.
* ``ideal_s``: on each device, the larger of its synchronous ops' rooflines summed and its
  busiest link's async traffic (host-to-device, device-to-host and ICI transfers may overlap
  compute but not each other on one link); the step's is the largest over devices.  An op
  measured faster than its roofline counts at its measured time (its record says why it beat
  the model); where a device's ops overlap in time, the ideal is what each resource (compute,
  HBM, ICI, host link) must carry, summed over the ops, whichever is largest.  The ideal never
  exceeds ``measured_s``; where only a cap keeps it there, ``note`` says so.
* ``mfu``: the step's FLOPs over all its devices (the trace's ``model_flops`` where it has
  them, else profan's) divided by the chip's dense ``MFU_PEAK_DTYPE`` peak x ``measured_s`` x the
  devices that ran ops in the step.  A device of the trace that ran no op at all is not counted
  (the programs did not run on it: its idle time is no part of theirs); the first step's note
  says how many there were, and, for a trace without step markers, which rule chose the steps.
* ``share_<bound>``: the share of the step's op time whose op is bound by it.
* ``time_<bound>_s`` and ``idle_s``: per device (mean over the step's devices), the step's
  ``measured_s`` split as the summary splits the busy span (``profan.roofline.timeline``: each
  instant shared evenly by the ops running then): the time of ops bound by each bound, and the
  time no op ran; they sum to ``measured_s``.  (The shares times ``measured_s`` would hide the
  idle time and count overlapping ops twice.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profan.arrays import distinct
from profan.chips import Chip
from profan.roofline.ops import OpRecord
from profan.roofline.terms import BOUNDS
from profan.roofline.timeline import _shares
from profan.trace.join import spread_category
from profan.trace.steps import inferred_steps
from profan.units import seconds

if TYPE_CHECKING:
    from profan.trace.profile import Profile

# MFU is measured against the chip's dense peak for this dtype (the figure vendors quote).
MFU_PEAK_DTYPE = "bf16"

TERMS = ("t_compute_s", "t_hbm_s", "t_ici_s", "t_host_s", "t_transcendental_s")
_TOLERANCE = 1e-9  # relative: float sums of equal times


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step against the roofline (the module's docstring says how each figure is
    measured).  The fields' order is the report's (JSON ``steps``)."""

    step: int
    measured_s: float  # the step's ops' span, never less than its window
    ideal_s: float
    efficiency: float | None  # ideal over measured (None: a step of 0 s)
    mfu: float | None
    model_flops: float  # over all the step's devices
    # the share of the step's op time whose op each bound (profan.roofline.terms.BOUNDS) bounds
    share_compute: float
    share_hbm: float
    share_ici: float
    share_host: float
    share_transcendental: float
    share_unknown: float
    # per device: the measured time split by the bound of the ops running, and idle
    time_compute_s: float
    time_hbm_s: float
    time_ici_s: float
    time_host_s: float
    time_transcendental_s: float
    time_unknown_s: float
    idle_s: float
    window_s: float  # the trace's step window
    devices: int  # that ran ops in the step
    note: str | None


@dataclass(slots=True)
class _Executions:
    """Every op execution that belongs to a step, with its per-execution roofline figures: one
    array entry per execution (numpy columns, not a table: half a million rows of them are the
    largest thing scoring holds)."""

    step: np.ndarray  # int64
    device: pd.Categorical  # ``spans.device_keys``
    columns: dict[str, np.ndarray]  # start_s, duration_s, _roofline, _flops, _async, ...
    bound: pd.Categorical
    link: pd.Categorical | None  # built only when some execution is async
    # a roofline term of each execution (capped at its duration unless async), made on demand
    term: Callable[[str], np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]


def _executions(
    profile: Profile, ops: Sequence[OpRecord], rows: np.ndarray, devices: pd.Series
) -> _Executions:
    """``_Executions`` of the profile (``rows``: each execution's position in ``ops``, see
    ``spans.event_rows``; ``devices``: ``spans.device_keys`` of its ops)."""
    events = profile.ops
    in_step = events["step"].notna().to_numpy()  # executions outside every step are left out
    # (where every execution is in a step, the columns are views, not copies: half a million
    # rows of each are most of what scoring holds)
    take: slice | np.ndarray = slice(None) if in_step.all() else in_step
    rows = rows[take]
    occurrences = np.array([max(op.occurrences, 1) for op in ops], dtype=float)
    # each execution's op, or one past the last (where a per-op value gets its fill)
    slot = np.where(rows >= 0, rows, len(ops))

    def per_execution(values: list[float | None], fill: float = 0.0) -> np.ndarray:
        """An op's total (None: unknown, NaN) per execution, on each of its executions."""
        numbers = np.array(values, dtype=float) / occurrences
        return np.append(numbers, fill)[slot]

    def per_execution_label(labels: list[str], fill: str | None) -> pd.Categorical:
        """An op's label on each of its executions (``fill`` where it has no op record), as a
        categorical: the labels are few, the executions many."""
        return spread_category(np.array([*labels, fill], dtype=object), slot)

    start = events["start_s"].to_numpy()[take]
    duration = events["duration_s"].to_numpy()[take]
    is_async = np.array([op.async_role is not None for op in ops] + [False], dtype=bool)[slot]
    roofline = per_execution([op.roofline_s for op in ops])
    columns = {
        "start_s": start,
        "duration_s": duration,
        "_roofline": roofline,
        "_flops": per_execution([op.flops for op in ops], np.nan),
        "_async": is_async,
        # An op measured faster than its roofline (the model over-counts it; its record says
        # why) counts at its measured time: the step's ideal must stay a lower bound.
        "_ideal": np.where(is_async, roofline, np.minimum(roofline, duration)),
        "_faster": ~is_async & (roofline > duration * (1 + _TOLERANCE)),
    }

    def term(name: str) -> np.ndarray:
        values = per_execution([getattr(op, name) for op in ops])
        return np.where(is_async, values, np.minimum(values, duration))

    if "trace_model_flops" in events:
        columns["trace_model_flops"] = events["trace_model_flops"].to_numpy()[take]
    return _Executions(
        step=events["step"].to_numpy(dtype=np.int64, na_value=0)[take],
        device=devices.array[take],
        columns=columns,
        bound=per_execution_label([op.bound_by for op in ops], "unknown"),
        link=per_execution_label([op.link for op in ops], None) if is_async.any() else None,
        term=term,
    )


def _busy(starts: np.ndarray, ends: np.ndarray) -> float:
    """Time covered by the union of the intervals."""
    order = np.argsort(starts, kind="quicksort")  # as pandas' sort_values orders them
    covered, reach = 0.0, -math.inf
    for start, end in zip(starts[order].tolist(), ends[order].tolist(), strict=True):
        if end <= reach:
            continue
        covered += end - max(start, reach)
        reach = end
    return covered


def _step_groups(step: np.ndarray, codes: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The (step, code) groups as ``step * width + code``, sorted, and each execution's group
    (int32): steps and codes are few, so counted, not hashed (``profan.arrays.distinct``)."""
    key = step * width
    key += codes
    return distinct(key)


def _device_ideals(frame: _Executions) -> pd.DataFrame:
    """Per (step, device): span, ideal and a note where its ops overlap in time."""
    codes = frame.device.codes
    width = int(codes.max()) + 1 if len(codes) else 1
    groups, which = _step_groups(frame.step, codes, width)
    size = len(groups)
    start = np.full(size, np.inf)
    end = np.full(size, -np.inf)
    np.minimum.at(start, which, frame["start_s"].astype(float, copy=False))
    np.maximum.at(end, which, frame["start_s"] + frame["duration_s"])
    busy_sum = np.bincount(which, frame["duration_s"].astype(float, copy=False), minlength=size)
    sync = ~frame["_async"]
    every = bool(sync.all())  # (no async op: no copies of the synchronous ones)
    sync_groups = which if every else which[sync]

    def summed(values: np.ndarray) -> np.ndarray:
        values = values.astype(float, copy=False)
        return np.bincount(sync_groups, values if every else values[sync], minlength=size)

    serial = summed(frame["_ideal"])
    pool = np.zeros(size)
    if (~sync).any() and frame.link is not None:
        transfers = pd.DataFrame(
            {"group": which[~sync], "link": np.asarray(frame.link)[~sync],
             "ideal": frame["_roofline"].astype(float, copy=False)[~sync]}
        )  # fmt: skip
        per_link = transfers.groupby(["group", "link"])["ideal"].sum().groupby(level=0).max()
        pool[per_link.index.to_numpy()] = per_link.to_numpy()
    table = pd.DataFrame(
        {
            "step": groups // width,
            "device": frame.device.categories[groups % width],
            "span": end - start,
            "ideal": np.maximum(serial, pool),
            "note": None,
        }
    )
    resources = None  # what each resource must carry, summed: only where ops overlap
    for index in np.flatnonzero(
        table["ideal"].to_numpy() > table["span"].to_numpy() * (1 + _TOLERANCE)
    ):
        # rare: the serial sum exceeds the device's span; do its ops overlap?
        members = which == index
        ends = frame["start_s"][members] + frame["duration_s"][members]
        if _busy(frame["start_s"][members], ends) < busy_sum[index]:
            # ops overlap on this device (streams, threads): what each resource must carry
            if resources is None:
                resources = np.max([summed(frame.term(term)) for term in TERMS], axis=0)
            table.at[index, "ideal"] = max(resources[index], pool[index])
            device = table.at[index, "device"]
            table.at[index, "note"] = (
                f"device {device}: its ops overlap in time, so the ideal is what the busiest "
                "resource must carry (compute, HBM, interconnect or host link, summed over the ops)"
            )
    return table


def _time_by_bound(frame: _Executions) -> dict[str, dict[int, float]]:
    """Op time per bound per step: the executions' durations summed per (step, bound) group,
    every bound of ``frame.bound``'s categories (0.0 where a step has none of it)."""
    bounds = frame.bound
    width = len(bounds.categories)
    groups, which = _step_groups(frame.step, bounds.codes, width)
    groups_of_rows = pd.Categorical.from_codes(which, categories=groups)  # grouped by codes
    sums = pd.Series(frame["duration_s"], copy=False).groupby(groups_of_rows, observed=True).sum()
    steps = pd.unique(frame.step)
    found = dict(zip(sums.index.tolist(), sums.tolist(), strict=True))
    return {
        str(bound): {int(step): found.get(int(step) * width + code, 0.0) for step in steps}
        for code, bound in enumerate(bounds.categories)
    }


def _busy_by_bound(frame: _Executions) -> dict[int, dict[str, float]]:
    """Per step, each bound's share of the busy time of each device (an instant shared evenly
    by the ops running then, as ``timeline.time_breakdown`` splits the whole profile), summed
    over the step's devices and divided by their count: per device."""
    codes = frame.device.codes
    width = int(codes.max()) + 1 if len(codes) else 1
    groups, which = _step_groups(frame.step, codes, width)
    order = np.argsort(which, kind="stable")
    cuts = np.flatnonzero(np.diff(which[order])) + 1
    starts = frame["start_s"].astype(float, copy=False)
    ends = starts + frame["duration_s"].astype(float, copy=False)
    bound_codes = frame.bound.codes
    shares = np.zeros(len(starts))
    for members in np.split(order, cuts):
        shares[members], _ = _shares(starts[members], ends[members])
    step_of_group = groups // width
    devices = np.bincount(np.searchsorted(np.unique(step_of_group), step_of_group))
    out: dict[int, dict[str, float]] = {}
    bounds = [str(b) for b in frame.bound.categories]
    steps = np.unique(step_of_group)
    step_index = np.searchsorted(steps, frame.step)
    sums = np.zeros((len(steps), len(bounds)))
    np.add.at(sums, (step_index, bound_codes), shares)
    for i, step in enumerate(steps.tolist()):
        out[int(step)] = {bound: float(sums[i, k]) / devices[i] for k, bound in enumerate(bounds)}
    return out


def _first_step_notes(profile: Profile, devices: pd.Series) -> list[str]:
    """What the first step's note says of every step: which rule chose the steps of a trace
    without step markers, and the devices MFU is over where some of the trace's ran no op."""
    notes = []
    rule = inferred_steps(profile.notes)
    if rule is not None:
        notes.append(f"steps: {rule}")
    ran = len(distinct(devices.cat.codes.to_numpy())[0]) if len(devices) else 0
    planes = profile.device.count
    if ran and planes > ran:
        notes.append(
            f"MFU is over the {ran} device{'s' if ran > 1 else ''} that ran ops; "
            f"{planes - ran} of the trace's {planes} devices ran none and are not counted"
        )
    return notes


def step_rows(
    profile: Profile,
    chip: Chip,
    ops: Sequence[OpRecord],
    rows: np.ndarray,
    devices: pd.Series,
) -> list[StepRecord]:
    """One record per step: measured time, ideal time, efficiency, MFU and time shares per bound
    (``rows``: each execution's position in ``ops``; ``devices``: ``spans.device_keys`` of
    the executions)."""
    events = profile.ops
    if events.empty or "step" not in events or profile.steps is None or profile.steps.empty:
        return []
    frame = _executions(profile, ops, rows, devices)
    # Sums per step (pandas' grouped sums: compensated, in row order) over one grouping.
    per_step_sums = pd.DataFrame(
        {
            name: frame[name]
            for name in ("trace_model_flops", "_flops", "duration_s", "_faster")
            if name in frame.columns
        },
        copy=False,
    ).groupby(frame.step)
    if "trace_model_flops" in frame.columns:
        model = per_step_sums["trace_model_flops"].sum(min_count=1)
        model_flops = model.fillna(per_step_sums["_flops"].sum())
    else:
        model_flops = per_step_sums["_flops"].sum()
    op_time = per_step_sums["duration_s"].sum()
    by_bound = _time_by_bound(frame)
    busy_by_bound = _busy_by_bound(frame)
    peak = chip.device_peak_flops(MFU_PEAK_DTYPE)
    devices_table = _device_ideals(frame)
    per_step = devices_table.groupby("step").agg(
        ideal=("ideal", "max"), span=("span", "max"), devices=("span", "size")
    )
    ideal_of, span_of = per_step["ideal"].to_dict(), per_step["span"].to_dict()
    devices_of = per_step["devices"].to_dict()
    device_notes = devices_table.dropna(subset=["note"]).groupby("step")["note"].agg(list)
    faster_by_step = per_step_sums["_faster"].sum().to_dict()
    op_time = op_time.to_dict()
    model_flops = model_flops.to_dict()
    bound_time = {bound: by_bound[bound] for bound in BOUNDS if bound in by_bound}
    first_notes = _first_step_notes(profile, devices)
    records: list[StepRecord] = []
    for step_row in profile.steps.itertuples(index=False):
        step = step_row.step
        if step not in ideal_of:
            continue
        notes: list[str] = [*([] if records else first_notes), *device_notes.get(step, [])]
        ideal, span = float(ideal_of[step]), float(span_of[step])
        window = float(step_row.duration_s)
        measured = max(window, span)
        if span > window * (1 + _TOLERANCE):
            notes.append(
                f"the step's ops run {seconds(span - window)} past its window ({seconds(window)}; "
                "ops of other programs follow the step's program): measured over their span"
            )
        faster = int(faster_by_step.get(step, 0))
        if faster:
            notes.append(
                f"{faster} op execution(s) ran faster than their roofline (see their notes) "
                "and count at their measured time"
            )
        if ideal > measured * (1 + _TOLERANCE):
            notes.append(
                f"the model's ideal ({seconds(ideal)}) exceeds the measured step "
                "and is capped at it"
            )
            ideal = measured
        total = float(op_time.get(step, 0.0)) or 1.0
        shares = {b: float(bound_time[b][step]) / total if b in bound_time else 0.0 for b in BOUNDS}
        busy = busy_by_bound.get(step, {})
        times = {b: float(busy.get(b, 0.0)) for b in BOUNDS}
        times["unknown"] = float(sum(v for b, v in busy.items() if b not in BOUNDS))
        devices = max(int(devices_of[step]), 1)
        step_model = float(model_flops.get(step, 0.0))
        records.append(
            StepRecord(
                step=int(step),
                measured_s=measured,
                ideal_s=ideal,
                efficiency=ideal / measured if measured > 0 else None,
                mfu=step_model / (peak * measured * devices) if measured > 0 else None,
                model_flops=step_model,
                share_compute=shares["compute"],
                share_hbm=shares["hbm"],
                share_ici=shares["ici"],
                share_host=shares["host"],
                share_transcendental=shares["transcendental"],
                share_unknown=max(0.0, 1.0 - sum(shares.values())),
                time_compute_s=times["compute"],
                time_hbm_s=times["hbm"],
                time_ici_s=times["ici"],
                time_host_s=times["host"],
                time_transcendental_s=times["transcendental"],
                time_unknown_s=times["unknown"],
                idle_s=float(max(measured - sum(times.values()), 0.0)),
                window_s=window,
                devices=devices,
                note="; ".join(notes) or None,
            )
        )
    return records
