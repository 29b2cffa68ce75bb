"""Steps of a profile: from the trace's step markers, else one per execution of the dominant
module; every op row gets the step it belongs to.

Markers, in order of preference: TPU ``Steps`` lines and ``StepTraceAnnotation`` events
(``step_num``).  Without them, each execution of the module with the most op time is a step,
found from the ``XLA Modules`` line (TPU), the ``run_id`` of each execution (CPU/GPU), or else
the recurrences of that module's first op.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from profan.trace.planes import NA_INT, HostTrace
from profan.trace.profile import row_groups


def assign_steps(
    ops: pd.DataFrame,
    hosts: list[HostTrace],
    base_ns: int,
    origin_ps: int,
    notes: list[str],
) -> pd.DataFrame:
    """Give every op a step; return the steps table (step, start_ps, end_ps, duration_ps)."""
    # All <NA> to begin with (built from a mask: an object array of NA would cost 8 B a row).
    ops["step"] = pd.arrays.IntegerArray(
        np.zeros(len(ops), dtype=np.int64), np.ones(len(ops), dtype=bool)
    )
    marks = []
    for host in hosts:
        shift = (host.base_ns - base_ns) * 1000
        marks += [(host.host, n, s + shift, e + shift, src) for n, s, e, src in host.step_marks]
    if marks:
        table = pd.DataFrame(marks, columns=["host", "step", "start_ps", "end_ps", "source"])
        per_step = _windows(table)
        per_step["duration_ps"] = (table["end_ps"] - table["start_ps"]).groupby(table["step"]).max()
        per_step = per_step.reset_index().sort_values("start_ps")
        notes.append(f"steps from {table['source'].iloc[0]} ({len(per_step)} steps)")
        if table["host"].nunique() > 1:
            # Each host's ops by its own markers: host clocks differ (see profan.trace.hosts).
            for host, rows in ops.groupby("host", sort=False).indices.items():
                mine = table[table["host"] == host]
                windows = _windows(mine).reset_index() if len(mine) else per_step
                steps_by_time(ops, windows, 0, by_execution=True, rows=rows)
        else:
            steps_by_time(ops, per_step, 0, by_execution=True)
        return per_step
    return _steps_from_dominant_module(ops, hosts, base_ns, notes)


def _windows(table: pd.DataFrame) -> pd.DataFrame:
    """Step windows (start_ps, end_ps by step, sorted by start) of step markers."""
    windows = table.groupby("step").agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max"))
    return windows.sort_values("start_ps")


def steps_by_time(
    frame: pd.DataFrame,
    steps: pd.DataFrame,
    origin_ps: int,
    by_execution: bool = False,
    rows: np.ndarray | None = None,
) -> None:
    """Step of each row (of ``rows`` only, when given): the step window holding its start (or
    its execution's start)."""
    starts = steps["start_ps"].to_numpy()
    ends = steps["end_ps"].to_numpy()
    numbers = steps["step"].to_numpy()
    part = frame if rows is None else frame.iloc[rows]
    times = part["_start_ps"].to_numpy()
    if by_execution and "run_id" in part and (part["run_id"] != NA_INT).any():
        # CPU: an execution's ops run on several threads; date the whole execution by its
        # first op so every op of one (run_id, device) lands in the same step.
        execution, _ = row_groups(part, ("run_id", "device"))
        first = np.full(int(execution.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, execution, times)
        has_run = part["run_id"].to_numpy() != NA_INT
        times = np.where(has_run, first[execution], times)
    slot = np.searchsorted(starts, times, side="right") - 1
    valid = (slot >= 0) & (times < ends[np.clip(slot, 0, None)])
    values = pd.array(np.where(valid, numbers[np.clip(slot, 0, None)], 0), dtype="Int64")
    values[~valid] = pd.NA
    if rows is None:
        frame["step"] = values
    else:
        frame.iloc[rows, frame.columns.get_loc("step")] = values


def _steps_from_dominant_module(
    ops: pd.DataFrame, hosts: list[HostTrace], base_ns: int, notes: list[str]
) -> pd.DataFrame:
    """No step markers: one step per execution of the module with the most op time."""
    busy = ops.groupby("module", dropna=True)["duration_ps"].sum()
    if busy.empty:
        notes.append("no steps: no step markers and no module names on the ops")
        return pd.DataFrame(columns=["step", "start_ps", "end_ps", "duration_ps"])
    dominant = str(busy.idxmax())
    windows: list[tuple[int, Any, int, int]] = []  # (step, device, start, end)
    runs = []
    for host in hosts:
        if host.module_runs:
            shift = (host.base_ns - base_ns) * 1000
            table = pd.DataFrame(host.module_runs)
            table = table[table["module"] == dominant]
            runs.append(
                pd.DataFrame(
                    {
                        "device": [f"{host.host}/{d}" for d in table["device"]],
                        "start": table["start_ps"].to_numpy() + shift,
                        "end": table["start_ps"].to_numpy()
                        + table["duration_ps"].to_numpy()
                        + shift,
                    }
                )
            )
    ops_device = ops["host"].astype(str) + "/" + ops["device"].astype(str)
    if runs:
        source = "XLA Modules line"
        table = pd.concat(runs).sort_values("start")
        table["step"] = table.groupby("device").cumcount()
        windows = list(table[["step", "device", "start", "end"]].itertuples(index=False))
    elif (ops["run_id"] != NA_INT).any():
        source = "run_id of each execution"
        mine = ops[ops["module"] == dominant]
        mine = mine.assign(
            devkey=ops_device[mine.index], _end=mine["_start_ps"] + mine["duration_ps"]
        )
        spans = (
            mine.groupby(["run_id", "devkey"])
            .agg(start=("_start_ps", "min"), end=("_end", "max"))
            .reset_index()
        )
        first = spans.groupby("run_id")["start"].min().sort_values()
        order = {run: index for index, run in enumerate(first.index)}
        windows = [
            (order[r.run_id], r.devkey, int(r.start), int(r.end))
            for r in spans.itertuples(index=False)
        ]
    else:
        source = "recurrences of the first op"
        mine = ops[ops["module"] == dominant].assign(devkey=ops_device)
        for device, group in mine.groupby("devkey", sort=False):
            group = group.sort_values("_start_ps")
            first_op = group["op_name"].iloc[0]
            step_of = (group["op_name"] == first_op).cumsum() - 1
            ends = group["_start_ps"] + group["duration_ps"]
            for step, part in group.groupby(step_of):
                windows.append(
                    (int(step), device, int(part["_start_ps"].min()), int(ends[part.index].max()))
                )
    if not windows:
        notes.append(f"no steps: found no executions of the dominant module {dominant}")
        return pd.DataFrame(columns=["step", "start_ps", "end_ps", "duration_ps"])
    table = pd.DataFrame(windows, columns=["step", "device", "start", "end"])
    # Each op belongs to the latest execution (on its device) that started at or before it.
    steps = np.full(len(ops), -1, dtype=np.int64)
    device_codes = ops_device.to_numpy()
    times = ops["_start_ps"].to_numpy()
    for device, group in table.groupby("device", sort=False):
        group = group.sort_values("start")
        rows = np.flatnonzero(device_codes == device)
        slot = np.searchsorted(group["start"].to_numpy(), times[rows], side="right") - 1
        ok = slot >= 0
        steps[rows[ok]] = group["step"].to_numpy()[slot[ok]]
    ops["step"] = pd.array(np.where(steps >= 0, steps, 0), dtype="Int64")
    ops.loc[steps < 0, "step"] = pd.NA
    per_step = table.groupby("step").agg(start_ps=("start", "min"), end_ps=("end", "max"))
    per_step["duration_ps"] = (table["end"] - table["start"]).groupby(table["step"]).max()
    notes.append(
        f"steps: one per execution of the dominant module {dominant} ({source}; "
        f"{len(per_step)} steps)"
    )
    return per_step.reset_index()


def finish_steps(steps: pd.DataFrame, origin_ps: int) -> pd.DataFrame:
    """Steps in seconds since the profile's first op (``duration_s``: the slowest device's)."""
    if steps.empty:
        return pd.DataFrame(
            {"step": pd.array([], dtype="Int64"), "start_s": [], "end_s": [], "duration_s": []}
        )
    return pd.DataFrame(
        {
            "step": pd.array(steps["step"].to_numpy(dtype=np.int64), dtype="Int64"),
            "start_s": (steps["start_ps"].to_numpy(dtype=np.int64) - origin_ps) / 1e12,
            "end_s": (steps["end_ps"].to_numpy(dtype=np.int64) - origin_ps) / 1e12,
            "duration_s": steps["duration_ps"].to_numpy(dtype=np.float64) / 1e12,
        }
    )
