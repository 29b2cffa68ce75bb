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
  measured faster than its roofline counts at its measured time (``Score.ops`` says why it beat
  the model); where a device's ops overlap in time, the ideal is what each resource (compute,
  HBM, ICI, host link) must carry, summed over the ops, whichever is largest.  The ideal never
  exceeds ``measured_s``; where only a cap keeps it there, ``note`` says so.
* ``mfu``: the step's FLOPs over all its devices (the trace's ``model_flops`` where it has
  them, else profan's) divided by the chip's dense ``MFU_PEAK_DTYPE`` peak x ``measured_s`` x the
  devices that ran ops in the step.
* ``share_<bound>``: the share of the step's op time whose op is bound by it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profan.chips import Chip
from profan.roofline.spans import device_keys, key_column
from profan.roofline.terms import BOUNDS

if TYPE_CHECKING:
    from profan.trace.profile import Profile

# MFU is measured against the chip's dense peak for this dtype (the figure vendors quote).
MFU_PEAK_DTYPE = "bf16"

STEP_COLUMNS = [
    "step", "measured_s", "ideal_s", "efficiency", "mfu", "model_flops",
    *(f"share_{bound}" for bound in (*BOUNDS, "unknown")),
    "window_s", "devices", "note",
]  # fmt: skip
TERMS = ("t_compute_s", "t_hbm_s", "t_ici_s", "t_host_s")
_TOLERANCE = 1e-9  # relative: float sums of equal times


def _per_execution(per_op: pd.DataFrame) -> pd.DataFrame:
    """Per op: one execution's roofline, its terms, FLOPs, bound and link."""
    occurrences = per_op["occurrences"].where(per_op["occurrences"] > 0, 1)
    frame = pd.DataFrame(
        {
            "_key": key_column(per_op["module_key"]),
            "op_name": per_op["name"],
            "_roofline": per_op["roofline_s"] / occurrences,
            "_flops": pd.to_numeric(per_op["flops"], errors="coerce") / occurrences,
            "_bound": per_op["bound_by"],
            "_async": per_op["async_role"].notna(),
            "_link": per_op["link"],
        }
    )
    for term in TERMS:
        frame[f"_{term}"] = per_op[term] / occurrences
    return frame


def _executions(profile: Profile, per_op: pd.DataFrame) -> pd.DataFrame:
    """Every op execution that belongs to a step, with its per-execution roofline figures."""
    ops = profile.ops
    columns = ["module_key", "op_name", "step", "start_s", "duration_s"]
    columns += [c for c in ("trace_model_flops",) if c in ops]
    frame = ops[columns].assign(_key=key_column(ops["module_key"]), device=device_keys(ops))
    frame = frame[frame["step"].notna()]
    frame = frame.merge(_per_execution(per_op), on=["_key", "op_name"], how="left")
    frame["_roofline"] = frame["_roofline"].fillna(0.0)
    for term in TERMS:
        frame[f"_{term}"] = frame[f"_{term}"].fillna(0.0)
    frame["_bound"] = frame["_bound"].fillna("unknown")
    frame["_async"] = frame["_async"].fillna(False).astype(bool)
    frame["_end"] = frame["start_s"] + frame["duration_s"]
    # An op measured faster than its roofline (the model over-counts it; Score.ops says why)
    # counts at its measured time: the step's ideal must stay a lower bound.
    duration = frame["duration_s"]
    frame["_ideal"] = np.where(
        frame["_async"], frame["_roofline"], np.minimum(frame["_roofline"], duration)
    )
    frame["_faster"] = ~frame["_async"] & (frame["_roofline"] > duration * (1 + _TOLERANCE))
    for term in TERMS:
        frame[f"_{term}"] = np.where(
            frame["_async"], frame[f"_{term}"], np.minimum(frame[f"_{term}"], duration)
        )
    return frame


def _busy(frame: pd.DataFrame) -> float:
    """Time covered by the union of the executions' intervals."""
    order = frame.sort_values("start_s")
    covered, reach = 0.0, -math.inf
    for start, end in zip(order["start_s"], order["_end"], strict=True):
        if end <= reach:
            continue
        covered += end - max(start, reach)
        reach = end
    return covered


def _device_ideal(group: pd.DataFrame) -> tuple[float, float, list[str]]:
    """(ideal, span, notes) of one device's executions in one step."""
    span = float(group["_end"].max() - group["start_s"].min())
    sync = group[~group["_async"]]
    pools = group[group["_async"]].groupby("_link")["_roofline"].sum()
    pool = float(pools.max()) if len(pools) else 0.0
    notes: list[str] = []
    ideal = max(float(sync["_ideal"].sum()), pool)
    if ideal > span * (1 + _TOLERANCE) and _busy(group) < float(group["duration_s"].sum()):
        # ops overlap on this device (streams, threads): what each resource must carry
        resources = max(float(sync[f"_{term}"].sum()) for term in TERMS)
        ideal = max(resources, pool)
        notes.append(
            "its ops overlap in time, so the ideal is what the busiest resource must carry "
            "(compute, HBM, interconnect or host link, summed over the ops)"
        )
    return ideal, span, notes


def step_rows(profile: Profile, chip: Chip, per_op: pd.DataFrame) -> pd.DataFrame:
    """One row per step: measured time, ideal time, efficiency, MFU and time shares per bound."""
    ops = profile.ops
    if ops.empty or "step" not in ops or profile.steps is None or profile.steps.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    frame = _executions(profile, per_op)
    if "trace_model_flops" in frame:
        model = frame.groupby("step")["trace_model_flops"].sum(min_count=1)
        model_flops = model.fillna(frame.groupby("step")["_flops"].sum())
    else:
        model_flops = frame.groupby("step")["_flops"].sum()
    op_time = frame.groupby("step")["duration_s"].sum()
    by_bound = frame.groupby(["step", "_bound"])["duration_s"].sum().unstack(fill_value=0.0)
    peak = chip.device_peak_flops(MFU_PEAK_DTYPE)
    grouped = {step: group for step, group in frame.groupby("step")}
    rows = []
    for step_row in profile.steps.itertuples(index=False):
        step = step_row.step
        if step not in grouped:
            continue
        group = grouped[step]
        notes: list[str] = []
        ideal = span = 0.0
        for device, on_device in group.groupby("device"):
            device_ideal, device_span, device_notes = _device_ideal(on_device)
            ideal, span = max(ideal, device_ideal), max(span, device_span)
            notes += [f"device {device}: {note}" for note in device_notes]
        window = float(step_row.duration_s)
        measured = max(window, span)
        if span > window * (1 + _TOLERANCE):
            notes.append(
                f"the step's ops run {span - window:.3g} s past its window ({window:.3g} s; "
                "ops of other programs follow the step's program): measured over their span"
            )
        faster = int(group["_faster"].sum())
        if faster:
            notes.append(
                f"{faster} op execution(s) ran faster than their roofline (see their notes) "
                "and count at their measured time"
            )
        if ideal > measured * (1 + _TOLERANCE):
            notes.append(
                f"the model's ideal ({ideal:.3g} s) exceeds the measured step and is capped at it"
            )
            ideal = measured
        total = float(op_time.get(step, 0.0)) or 1.0
        shares = {
            f"share_{b}": float(by_bound.at[step, b]) / total if b in by_bound else 0.0
            for b in BOUNDS
        }
        shares["share_unknown"] = max(0.0, 1.0 - sum(shares.values()))
        devices = max(int(group["device"].nunique()), 1)
        step_model = float(model_flops.get(step, 0.0))
        rows.append(
            {
                "step": step,
                "measured_s": measured,
                "ideal_s": ideal,
                "efficiency": ideal / measured if measured > 0 else math.nan,
                "mfu": step_model / (peak * measured * devices) if measured > 0 else math.nan,
                "model_flops": step_model,
                **shares,
                "window_s": window,
                "devices": devices,
                "note": "; ".join(notes) or None,
            }
        )
    frame = pd.DataFrame(rows, columns=STEP_COLUMNS)
    frame["note"] = pd.Series([row["note"] for row in rows], index=frame.index, dtype=object)
    return frame
