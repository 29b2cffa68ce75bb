"""What the HTML page shows beyond the other formats, added to a built report.

Each op's HLO line, fused body and source stack (the detail pane), and every step's op slices
per device (the timeline).  ``profan report --format html`` asks for it
(``pipeline.report_for(page=True)``); the terminal and JSON reports never pay for it.  Both
travel in the report (``Report.to_dict``/``from_dict``), so a report read back renders the same
page.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from profan.hlo.printer import computation_to_text, instruction_to_text
from profan.hlo.views import called_computations, stack_trace
from profan.report.analysis.summary import op_identity
from profan.report.model import OpEntry, Report
from profan.report.slices import StepSlices, Timeline, encode_column
from profan.trace.profile import Profile

# A fused body longer than this many instructions is cut (the page says how many were left out).
FUSED_BODY_LINES = 120


def add_page_data(report: Report, profile: Profile) -> None:
    """Fill each op's ``hlo``, ``fused_body`` and ``stack``, and ``report.timeline``."""
    for entry in report.ops:
        _add_detail(entry, profile)
    report.timeline = timeline(profile, report.ops)


def _add_detail(entry: OpEntry, profile: Profile) -> None:
    if not entry.program:
        return
    module = profile.modules.get(entry.program)
    instruction = profile.instruction(entry.program, entry.name) if module is not None else None
    if module is None or instruction is None:
        return
    entry.hlo = instruction_to_text(instruction)
    entry.stack = [
        f"{frame.file}:{frame.line}" + (f" in {frame.function}" if frame.function else "")
        for frame in stack_trace(module, instruction)
    ]
    if instruction.opcode == "fusion":
        bodies = called_computations(instruction)
        if bodies:
            lines = computation_to_text(module.computation(bodies[0])).splitlines()
            if len(lines) > FUSED_BODY_LINES + 2:
                left_out = len(lines) - FUSED_BODY_LINES - 1
                lines = [*lines[:FUSED_BODY_LINES], f"  … {left_out} more instructions", "}"]
            entry.fused_body = "\n".join(lines)


def _codes(column: pd.Series) -> tuple[np.ndarray, list]:
    """Each row's code (-1 where missing) and the distinct values, without making a string of
    every row (500k rows on the benchmark trace)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(dtype=np.int64), list(column.cat.categories)
    codes, uniques = pd.factorize(column)
    return codes.astype(np.int64), list(uniques)


def _lanes(events: pd.DataFrame, in_flight: np.ndarray) -> tuple[np.ndarray, list[dict]]:
    """Each event's lane (one per host and device, ordered by host name, then device; an
    async op's start-to-done span goes to the device's "in flight" lane, just under it) and
    the lanes' descriptions."""
    host_code, hosts = _codes(events["host"])
    names = [str(host) for host in hosts] + [""]  # code -1: no host
    rank = np.argsort(np.argsort(names, kind="stable"), kind="stable")[host_code]
    device = events["device"].to_numpy(dtype=np.int64, na_value=-1)
    width = int(device.max()) + 2
    lane, keys = pd.factorize((rank * width + device + 1) * 2 + in_flight, sort=True)
    by_rank = sorted(names)
    lanes = []
    for key in keys.tolist():
        place, spans = divmod(key, 2)
        described = {
            "host": by_rank[place // width],
            "device": None if place % width == 0 else place % width - 1,
        }
        if spans:
            described["in_flight"] = True
        lanes.append(described)
    return lane, lanes


def _op_of_events(events: pd.DataFrame, ops: list[OpEntry]) -> tuple[np.ndarray, list[str]]:
    """Each event's index in ``ops``, or ``-(k + 1)`` for the k-th name of events without one.
    Events are many and ops few: each distinct (module, program, name) is looked up once."""
    key = np.zeros(len(events), dtype=np.int64)
    for column in ("module", "module_key", "op_name"):
        codes, values = _codes(events[column])
        key = key * (len(values) + 1) + codes + 1
    group_of, distinct = pd.factorize(key)  # groups numbered in order of first appearance
    first = np.empty(len(distinct), dtype=np.int64)
    first[group_of[::-1]] = np.arange(len(key) - 1, -1, -1)  # the last write is the first row
    identities = op_identity(events.iloc[first], "op_name")
    index = {(op.module, op.program or "", op.name): i for i, op in enumerate(ops)}
    names: dict[str, int] = {}
    per_group = np.empty(len(identities), dtype=np.int64)
    for group, (module, program, name) in enumerate(identities.itertuples(index=False)):
        found = index.get((module, program, name))
        per_group[group] = found if found is not None else -1 - names.setdefault(name, len(names))
    return per_group[group_of], list(names)


def timeline(profile: Profile, ops: list[OpEntry]) -> Timeline:
    """Every step's op executions per lane, sorted by lane then start, encoded per column; the
    spans of async ops (a TPU trace's "Async XLA Ops" line: start to done) in lanes of their
    own, so a transfer or a collective in flight is seen beside the ops it overlaps."""
    events = profile.ops
    if len(events) == 0:
        return Timeline(lanes=[], names=[])
    in_flight = np.zeros(len(events), dtype=np.int64)
    spans = profile.async_ops
    if spans is not None and len(spans):
        events = pd.concat([events, spans[list(events.columns)]], ignore_index=True)
        in_flight = np.concatenate([in_flight, np.ones(len(spans), dtype=np.int64)])
    lane, lanes = _lanes(events, in_flight)
    op, names = _op_of_events(events, ops)
    step = events["step"].to_numpy(dtype=np.int64, na_value=-1)
    in_step = events["step"].notna().to_numpy()
    notes = _notes(profile, lanes)
    if not in_step.any():  # no step marked at all: the whole profile is drawn as one, step -1
        in_step = np.ones(len(events), dtype=bool)
        notes.append("the trace marks no steps: the timeline shows the whole profile as one")
    start = events["start_s"].to_numpy(dtype=float) - _clock_offsets(profile, events)
    duration = events["duration_s"].to_numpy(dtype=float)
    chosen = np.flatnonzero(in_step)
    outside = int(len(events) - len(chosen))
    order = chosen[np.lexsort((start[chosen], lane[chosen], step[chosen]))]
    step, lane, op = step[order], lane[order], op[order]
    spanning = in_flight[order]
    start, duration = start[order], duration[order]
    step_start = dict(zip(profile.steps["step"].astype(int), profile.steps["start_s"], strict=True))
    firsts = np.concatenate(([0], np.flatnonzero(np.diff(step)) + 1))
    ends = np.append(firsts[1:], len(order))
    origins = np.array(
        [
            step_start.get(int(step[first]), start[first:end].min())
            for first, end in zip(firsts, ends, strict=True)
        ],
        dtype=float,
    )
    offset_ns = np.rint((start - np.repeat(origins, ends - firsts)) * 1e9)
    delta_ns = np.diff(offset_ns, prepend=0.0)
    delta_ns[firsts] = offset_ns[firsts]  # each step's differences start from its own origin
    duration_ns = np.rint(duration * 1e9)
    steps = [
        StepSlices(
            step=int(step[first]),
            start_s=float(origin),
            count=int(end - first),
            lane=encode_column(lane[first:end], "lane"),
            op=encode_column(op[first:end], "op"),
            start_ns=encode_column(delta_ns[first:end], "start_ns"),
            duration_ns=encode_column(duration_ns[first:end], "duration_ns"),
            in_flight=int(spanning[first:end].sum()),
        )
        for first, end, origin in zip(firsts, ends, origins, strict=True)
        if end > first
    ]
    return Timeline(lanes=lanes, names=names, steps=steps, outside_steps=outside, notes=notes)


def _clock_offsets(profile: Profile, events: pd.DataFrame) -> np.ndarray | float:
    """Each event's host clock offset (``profan.trace.hosts``: hosts' clocks aligned on the ends
    of the collectives they all ran), so the lanes of different hosts line up."""
    if profile.hosts is None:
        return 0.0
    offsets = {row.host: row.clock_offset_s for row in profile.hosts.hosts}
    codes, hosts = _codes(events["host"])
    per_code = np.array([offsets.get(str(host), 0.0) for host in hosts] + [0.0])
    return per_code[codes]


def _notes(profile: Profile, lanes: list[dict]) -> list[str]:
    notes = []
    if profile.hosts is not None:
        notes.append("hosts' clocks aligned as in the cross-host view: " + profile.hosts.alignment)
    shown = {lane["host"] for lane in lanes}
    hidden = [host for host in profile.device.hosts if host not in shown]
    if hidden:
        notes.append(
            f"only host {', '.join(sorted(shown))} is drawn: a profile of this size keeps the op "
            f"executions of its median host alone ({len(hidden)} other host(s) are in the "
            "cross-host view)"
        )
    return notes
