"""Steps of a profile: from the trace's step markers, else from the executions of the program
that is the step, else one window over the whole busy span; every op row gets the step it
belongs to.

Markers, in order of preference: TPU ``Steps`` lines and ``StepTraceAnnotation`` events
(``step_num``).  Without them, programs are told apart by program id (one module name can be
several programs: ``jit_dot`` on six shapes), and the program with the most op time is the step
when it is the only program, when every other program's ops run inside its executions, or when
it holds most of the op time and nearly all of the op time runs between its first execution and
the end of its last (``_step_rule``).  Its executions are found from the ``XLA Modules`` line
(TPU), the ``run_id`` of each execution (CPU), or else the recurrences of its first op (GPU).
When no program is the step (programs that ran one after another, as a benchmark runs them),
the one step is the whole busy span.  A note (``STEPS_NOTE``, read by ``inferred_steps``) says
which rule chose the steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from profan.trace.planes import NA_INT, PROGRAM_NA, HostTrace
from profan.trace.profile import row_groups

# The prefix of the note that says how the steps of a trace without step markers were found.
STEPS_NOTE = "steps: "
# Without markers, the busiest program's executions are the steps when it holds more than half
# of the op time (no other program, nor all the others together, hold more) and at most a tenth
# of the op time runs before its first execution or after its last: a profile that starts or
# stops mid-loop catches a little of the programs around it, but where more lies outside, the
# steps would leave that work out (before the first) or pile it onto the last step.
_STEP_PROGRAM_SHARE = 0.5
_STEP_COVERAGE = 0.9


def assign_steps(
    ops: pd.DataFrame,
    hosts: list[HostTrace],
    base_ns: int,
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
                steps_by_time(ops, windows, by_execution=True, rows=rows)
        else:
            steps_by_time(ops, per_step, by_execution=True)
        return per_step
    return _steps_without_marks(ops, hosts, base_ns, notes)


def _windows(table: pd.DataFrame) -> pd.DataFrame:
    """Step windows (start_ps, end_ps by step, sorted by start) of step markers."""
    windows = table.groupby("step").agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max"))
    return windows.sort_values("start_ps")


def steps_by_time(
    frame: pd.DataFrame,
    steps: pd.DataFrame,
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


def _steps_without_marks(
    ops: pd.DataFrame, hosts: list[HostTrace], base_ns: int, notes: list[str]
) -> pd.DataFrame:
    """No step markers: one step per execution of the program that is the step (``_step_rule``),
    else one window over the whole busy span."""
    program, labels, names, ids = _programs(ops)
    if not labels:
        notes.append("no steps: no step markers and no module names on the ops")
        return pd.DataFrame(columns=["step", "start_ps", "end_ps", "duration_ps"])
    durations = ops["duration_ps"].to_numpy(dtype=np.float64)
    named = program >= 0
    busy = np.bincount(program[named], weights=durations[named], minlength=len(labels))
    dominant = int(np.argmax(busy))
    devices = _Devices.of(ops)
    mine = program == dominant
    windows, source = _executions(
        ops, hosts, base_ns, mine, names[dominant], ids[dominant], devices
    )
    if windows.empty:
        notes.append(f"no steps: found no executions of the dominant module {labels[dominant]}")
        return pd.DataFrame(columns=["step", "start_ps", "end_ps", "duration_ps"])
    table = windows
    times = ops["_start_ps"].to_numpy()
    step, inside, within = _place(table, devices, times)
    total = float(durations.sum()) or 1.0
    share = float(busy[dominant]) / total
    covered = float(durations[within].sum()) / total
    why = _step_rule(share, covered, bool(inside[~mine].all()), int((busy > 0).sum()))
    if why is None:
        # Programs ran one after another (a benchmark of separate programs): the executions of
        # one are not the trace's steps, and a window per execution of every program would
        # average unrelated programs and leave out the gaps between them, which the busy span,
        # the idle time and the timeline all count.  One window covers what they cover.
        table = _busy_span(ops, devices, times)
        step, _, _ = _place(table, devices, times)
    ops["step"] = pd.array(np.where(step >= 0, step, 0), dtype="Int64")
    ops.loc[step < 0, "step"] = pd.NA
    per_step = table.groupby("step").agg(start_ps=("start", "min"), end_ps=("end", "max"))
    per_step["duration_ps"] = (table["end"] - table["start"]).groupby(table["step"]).max()
    if why is None:
        rule = (
            "one window over the whole busy span (each device's first op to its last): no step "
            f"markers, and no program is the step: the busiest, {labels[dominant]}, holds "
            f"{share:.1%} of the op time, and {covered:.1%} of all op time runs between the "
            "start of its first execution and the end of its last (programs run one after "
            "another)"
        )
    else:
        rule = (
            f"one per execution of the dominant module {labels[dominant]} ({source}; "
            f"{len(per_step)} steps): no step markers, and {why}"
        )
    notes.append(STEPS_NOTE + rule)
    return per_step.reset_index()


def _step_rule(share: float, covered: float, nested: bool, programs: int) -> str | None:
    """Why the busiest program's executions are the trace's steps (``share``: its share of the
    op time; ``covered``: the share of the op time that starts between the start of its first
    execution and the end of its last on the same device; ``nested``: every other op starts
    inside one of its executions), or None when they are not."""
    if programs == 1:
        return "it is the only program that ran"
    if nested:
        return "every other program's ops run inside its executions"
    if share > _STEP_PROGRAM_SHARE and covered >= _STEP_COVERAGE:
        return (
            f"it holds {share:.1%} of the op time, with {covered:.1%} of all op time between "
            "the start of its first execution and the end of its last"
        )
    return None


def inferred_steps(notes: list[str]) -> str | None:
    """How the steps of a trace without step markers were found (the note ``assign_steps``
    wrote), or None where the steps are the trace's own markers."""
    for note in notes:
        if note.startswith(STEPS_NOTE):
            return note[len(STEPS_NOTE) :]
    return None


def _programs(ops: pd.DataFrame) -> tuple[np.ndarray, list[str], list[str], list[int | None]]:
    """The program of each op row (-1: no module name), and each program's label
    (``name(program id)``, or the name where the trace gives no id), module name and program
    id.  Programs are told apart by id: one name can be several programs (``jit_dot`` on six
    shapes is six programs)."""
    group, first = row_groups(ops, ("module", "program_id"))
    code_of = np.full(len(first), -1, dtype=np.int64)
    labels: list[str] = []
    names: list[str] = []
    ids: list[int | None] = []
    modules = ops["module"].iloc[first].tolist()
    programs = ops["program_id"].to_numpy()[first].tolist()
    for index, (module, program_id) in enumerate(zip(modules, programs, strict=True)):
        if pd.isna(module):
            continue
        code_of[index] = len(labels)
        known = program_id != int(PROGRAM_NA)
        labels.append(f"{module}({program_id})" if known else str(module))
        names.append(str(module))
        ids.append(int(program_id) if known else None)
    return code_of[group], labels, names, ids


@dataclass(slots=True)
class _Devices:
    """Each op row's device (``code``, an index into ``labels``: ``host/device``), and the
    rows of each device (``order``: the rows sorted by device, ``bounds``: where each starts)."""

    code: np.ndarray
    labels: list[str]
    order: np.ndarray
    bounds: np.ndarray

    @classmethod
    def of(cls, ops: pd.DataFrame) -> _Devices:
        code, first = row_groups(ops, ("host", "device"))
        hosts = ops["host"].iloc[first].astype(str).tolist()
        numbers = ops["device"].iloc[first].astype(str).tolist()
        labels = [f"{host}/{number}" for host, number in zip(hosts, numbers, strict=True)]
        order = np.argsort(code, kind="stable")
        bounds = np.searchsorted(code[order], np.arange(len(labels) + 1))
        return cls(code, labels, order, bounds)

    def rows(self, index: int) -> np.ndarray:
        return self.order[self.bounds[index] : self.bounds[index + 1]]


def _executions(
    ops: pd.DataFrame,
    hosts: list[HostTrace],
    base_ns: int,
    mine: np.ndarray,
    module: str,
    program_id: int | None,
    devices: _Devices,
) -> tuple[pd.DataFrame, str]:
    """The windows (columns step, device, start, end) of the executions of one program (its op
    rows ``mine``; ``module``, ``program_id``: its name and id), and where they were found.
    Built with array operations: a trace of tiny ops can have millions of executions."""
    columns = ["step", "device", "start", "end"]
    runs = []
    for host in hosts:
        if host.module_runs:
            shift = (host.base_ns - base_ns) * 1000
            table = pd.DataFrame(host.module_runs)
            if program_id is not None and "program_id" in table:
                table = table[table["program_id"].to_numpy() == np.uint64(program_id)]
            else:
                table = table[table["module"] == module]
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
    if runs:
        table = pd.concat(runs).sort_values("start")
        table["step"] = table.groupby("device").cumcount()
        return table[columns].reset_index(drop=True), "XLA Modules line"
    rows = np.flatnonzero(mine)
    device = devices.code[rows]
    start = ops["_start_ps"].to_numpy()[rows]
    end = start + ops["duration_ps"].to_numpy()[rows]
    labels = np.asarray(devices.labels, dtype=object)
    run_id = ops["run_id"].to_numpy()[rows]
    if (run_id != NA_INT).any():
        # one window per (execution, device); executions numbered by their first start
        key = pd.MultiIndex.from_arrays([run_id, device])
        codes, uniques = pd.factorize(key)
        first = np.full(len(uniques), np.iinfo(np.int64).max, dtype=np.int64)
        last = np.full(len(uniques), np.iinfo(np.int64).min, dtype=np.int64)
        np.minimum.at(first, codes, start)
        np.maximum.at(last, codes, end)
        span_run = uniques.get_level_values(0).to_numpy()
        span_device = uniques.get_level_values(1).to_numpy()
        run_codes, distinct_runs = pd.factorize(span_run)
        run_start = np.full(len(distinct_runs), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(run_start, run_codes, first)
        order = np.empty(len(distinct_runs), dtype=np.int64)
        order[np.argsort(run_start, kind="stable")] = np.arange(len(distinct_runs))
        by_label = np.argsort(np.argsort(labels.astype(str), kind="stable"))
        spans = np.lexsort((by_label[span_device], span_run))  # (as groupby sorts its groups)
        table = pd.DataFrame(
            {
                "step": order[run_codes[spans]],
                "device": labels[span_device[spans]],
                "start": first[spans],
                "end": last[spans],
            }
        )
        return table, "run_id of each execution"
    # each device's ops by start: an execution begins where the device's first op recurs
    rank = np.empty(len(labels), dtype=np.int64)  # devices in order of first appearance
    appearing = pd.unique(device)
    rank[appearing] = np.arange(len(appearing))
    order = np.lexsort((start, rank[device]))
    device, start, end = device[order], start[order], end[order]
    names, _ = pd.factorize(ops["op_name"].to_numpy()[rows][order], use_na_sentinel=True)
    new_device = np.ones(len(order), dtype=bool)
    new_device[1:] = device[1:] != device[:-1]
    first_op = np.maximum.accumulate(np.where(new_device, np.arange(len(order)), 0))
    recurs = (names == names[first_op]) & (names[first_op] >= 0)
    step = np.cumsum(recurs) - np.cumsum(recurs)[first_op] + recurs[first_op] - 1
    opens = new_device.copy()
    opens[1:] |= step[1:] != step[:-1]
    at = np.flatnonzero(opens)
    table = pd.DataFrame(
        {
            "step": step[at],
            "device": labels[device[at]],
            "start": start[at],
            "end": np.maximum.reduceat(end, at) if len(at) else end[at],
        }
    )
    return table, "recurrences of the first op"


def _place(
    table: pd.DataFrame, devices: _Devices, times: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op row: its step (the latest window on its device that started at or before it;
    -1: none), whether it starts inside a window (before the windows started so far end), and
    whether it starts before the device's last window ends."""
    step = np.full(len(times), -1, dtype=np.int64)
    inside = np.zeros(len(times), dtype=bool)
    within = np.zeros(len(times), dtype=bool)
    index_of = {label: index for index, label in enumerate(devices.labels)}
    for device, group in table.groupby("device", sort=False):
        if device not in index_of:
            continue
        group = group.sort_values("start")
        rows = devices.rows(index_of[device])
        reach = np.maximum.accumulate(group["end"].to_numpy())
        slot = np.searchsorted(group["start"].to_numpy(), times[rows], side="right") - 1
        ok = slot >= 0
        step[rows[ok]] = group["step"].to_numpy()[slot[ok]]
        inside[rows[ok]] = times[rows[ok]] < reach[slot[ok]]
        within[rows] = ok & (times[rows] < reach[-1])
    return step, inside, within


def _busy_span(ops: pd.DataFrame, devices: _Devices, times: np.ndarray) -> pd.DataFrame:
    """One step window per device: its first op's start to its last op's end."""
    ends = times + ops["duration_ps"].to_numpy()
    count = len(devices.labels)
    start = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    end = np.full(count, np.iinfo(np.int64).min, dtype=np.int64)
    np.minimum.at(start, devices.code, times)
    np.maximum.at(end, devices.code, ends)
    return pd.DataFrame({"step": 0, "device": devices.labels, "start": start, "end": end})


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
