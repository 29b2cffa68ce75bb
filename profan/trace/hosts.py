"""Cross-host analysis: which host was slow in which step, and how long the others waited.

Two halves, so that only small results cross process boundaries:

* ``summarize_host`` (the map side, run where a host's events are): one host's op table reduced
  to its per-step windows, the start and end of every collective it ran in each step, its idle
  time and its per-op totals (``HostSummary``);
* ``analyse_hosts`` (the reduce side): the ``HostsAnalysis`` of all hosts' summaries.

**Clock alignment.**  Each host stamps its events with its own clock, and clocks of different
machines differ by far more than a step's skew.  A collective that every host runs in a step
*ends* at the same moment everywhere (no host can leave it before the last one arrived and the
data went round), so the hosts' clocks are aligned on those ends: a host's offset is the median,
over every shared collective of every step, of its end time minus the median host's end time.
Arrivals are then compared on the aligned clock.

**Lateness.**  ``late_s[step]`` of a host is how much later than the median host it started the
step (its first op, aligned).  ``arrival_late_s[step]`` is the same for its arrival at the step's
first shared collective.  A host is a straggler when its median lateness exceeds 5% of the median
step time (and 100 us).  ``wait_s`` of a step is the time every other host spent inside the
shared collectives beyond what the fastest host spent in them: the time they waited.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profan.hlo.model import Instruction
from profan.hlo.opcodes import COLLECTIVE_OPCODES

# (module key, op name) -> the instruction the op ran (``Profile.instruction``)
InstructionLookup = Callable[[str, str], Instruction | None]

STRAGGLER_SHARE = 0.05  # of the median step time
STRAGGLER_FLOOR_S = 100e-6


def _no_collectives() -> np.ndarray:
    return np.zeros((0, 5), dtype=np.int64)


@dataclass(slots=True, eq=False)
class HostSummary:
    """What the cross-host view needs of one host (times: integer ns on the host's own clock)."""

    host: str
    devices: list[int]
    # step -> (first op start, last op end) over the host's devices
    step_windows: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Every collective the host ran in a step, one row each: step, index into
    # ``collective_ops``, occurrence in the step, earliest start, latest end (over its devices).
    # An int64 table, not a dict of tuples: a pod's parent holds one summary per host while the
    # map runs, and the table is about a tenth of the size.
    collective_table: np.ndarray = field(default_factory=_no_collectives)
    collective_ops: tuple[str, ...] = ()
    op_time_s: float = 0.0  # op time summed over the host's devices
    busy_s: float = 0.0  # per device, time covered by ops (union), summed over devices
    span_s: float = 0.0  # per device, first op start to last op end, summed over devices

    @property
    def collectives(self) -> dict[tuple[int, str, int], tuple[int, int]]:
        """(step, op name, occurrence in the step) -> (earliest start, latest end)."""
        names = self.collective_ops
        return {
            (step, names[op], k): (start, end)
            for step, op, k, start, end in self.collective_table.tolist()
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, HostSummary):
            return NotImplemented
        return (self.host, self.devices, self.step_windows, self.collectives) == (
            other.host,
            other.devices,
            other.step_windows,
            other.collectives,
        ) and (self.op_time_s, self.busy_s, self.span_s) == (
            other.op_time_s,
            other.busy_s,
            other.span_s,
        )


@dataclass(slots=True)
class HostRow:
    """One host in the cross-host view."""

    host: str
    devices: list[int]
    step_time_median_s: float
    step_time_p90_s: float
    late_s: dict[int, float]  # per step, vs the median host (aligned clocks)
    arrival_late_s: dict[int, float]  # per step, at the first shared collective
    late_median_s: float
    clock_offset_s: float  # subtracted from this host's times to align it
    idle_share: float  # idle time / span, over its devices
    straggler: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "devices": self.devices,
            "step_time_median_s": self.step_time_median_s,
            "step_time_p90_s": self.step_time_p90_s,
            "late_s": [self.late_s[s] for s in sorted(self.late_s)],
            "late_median_s": self.late_median_s,
            "arrival_late_s": [self.arrival_late_s[s] for s in sorted(self.arrival_late_s)],
            "clock_offset_s": self.clock_offset_s,
            "idle_share": self.idle_share,
            "straggler": self.straggler,
        }


@dataclass(slots=True)
class HostsAnalysis:
    """The cross-host view of a multi-host profile."""

    hosts: list[HostRow]
    steps: list[int]
    skew_s: dict[int, float]  # per step: latest minus earliest aligned step start
    wait_s: dict[int, float]  # per step: time the hosts spent waiting in shared collectives
    stragglers: list[str]
    alignment: str  # how the clocks were aligned, in words
    shared_collectives: list[str]

    @property
    def max_skew_s(self) -> float:
        return max(self.skew_s.values(), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "hosts": [row.to_dict() for row in self.hosts],
            "steps": self.steps,
            "skew_s": [self.skew_s[s] for s in self.steps],
            "wait_s": [self.wait_s.get(s, 0.0) for s in self.steps],
            "max_skew_s": self.max_skew_s,
            "stragglers": self.stragglers,
            "alignment": self.alignment,
            "shared_collectives": self.shared_collectives,
        }


def _collective_ops(ops: pd.DataFrame, instruction_of: InstructionLookup) -> np.ndarray:
    """Rows whose instruction is a collective (or the done of an async one)."""
    opcodes: dict[tuple[str, str], str | None] = {}
    keys = ops["module_key"].astype(object).to_numpy()
    names = ops["op_name"].astype(object).to_numpy()
    found = np.zeros(len(ops), dtype=bool)
    for index, (key, name) in enumerate(zip(keys, names, strict=True)):
        if (key, name) not in opcodes:
            known = isinstance(key, str) and isinstance(name, str)
            instruction = instruction_of(key, name) if known else None
            opcode = instruction.opcode if instruction is not None else None
            role = COLLECTIVE_OPCODES.get(opcode or "", (None, None))[1]
            opcodes[(key, name)] = opcode if role in ("sync", "async-done") else None
        found[index] = opcodes[(key, name)] is not None
    return found


def summarize_host(
    host: str, ops: pd.DataFrame, origin_ns: int, instruction_of: InstructionLookup
) -> HostSummary:
    """One host's events (rows of ``Profile.ops``) reduced to its ``HostSummary``;
    ``instruction_of``: ``Profile.instruction`` (module key, op name -> its instruction)."""
    devices = sorted(int(d) for d in ops["device"].dropna().unique())
    summary = HostSummary(host=host, devices=devices)
    if ops.empty:
        return summary
    # Integer ns on the host's clock: the same sums whichever origin the table was built with.
    start = origin_ns + np.rint(ops["start_s"].to_numpy(dtype=float) * 1e9).astype(np.int64)
    end = start + np.rint(ops["duration_s"].to_numpy(dtype=float) * 1e9).astype(np.int64)
    summary.op_time_s = float((end - start).sum()) / 1e9
    device = ops["device"].fillna(-1).to_numpy(dtype=np.int64)
    busy = span = 0
    for dev in np.unique(device):
        mine = device == dev
        order = np.argsort(start[mine], kind="stable")
        s, e = start[mine][order], np.maximum.accumulate(end[mine][order])
        new_block = np.ones(len(s), dtype=bool)
        new_block[1:] = s[1:] > e[:-1]
        block_end = np.maximum.reduceat(e, np.flatnonzero(new_block))
        busy += int((block_end - s[new_block]).sum())
        span += int(e[-1] - s[0])
    summary.busy_s, summary.span_s = busy / 1e9, span / 1e9
    step = ops["step"].to_numpy(dtype=float, na_value=np.nan)
    has_step = ~np.isnan(step)
    frame = pd.DataFrame({"step": step[has_step], "start": start[has_step], "end": end[has_step]})
    for number, window in (
        frame.groupby("step").agg(start=("start", "min"), end=("end", "max")).iterrows()
    ):
        summary.step_windows[int(number)] = (int(window["start"]), int(window["end"]))
    collective = _collective_ops(ops, instruction_of) & has_step
    if collective.any():
        rows = pd.DataFrame(
            {
                "step": step[collective].astype(np.int64),
                "device": device[collective],
                "op": ops["op_name"].astype(str).to_numpy()[collective],
                "start": start[collective],
                "end": end[collective],
            }
        ).sort_values("start", kind="stable")
        # The k-th execution of an op in a step, counted per device, is one collective.
        rows["k"] = rows.groupby(["step", "device", "op"]).cumcount()
        spans = rows.groupby(["step", "op", "k"]).agg(start=("start", "min"), end=("end", "max"))
        ops_of_rows = spans.index.get_level_values("op").astype(str)
        names, op_index = np.unique(ops_of_rows.to_numpy(), return_inverse=True)
        summary.collective_ops = tuple(str(name) for name in names)
        summary.collective_table = np.column_stack(
            [
                spans.index.get_level_values("step").to_numpy(dtype=np.int64),
                op_index.astype(np.int64),
                spans.index.get_level_values("k").to_numpy(dtype=np.int64),
                spans["start"].to_numpy(dtype=np.int64),
                spans["end"].to_numpy(dtype=np.int64),
            ]
        )
    return summary


def _median(values: list[float]) -> float:
    return float(np.median(values)) if values else math.nan


def analyse_hosts(summaries: list[HostSummary]) -> HostsAnalysis | None:
    """The cross-host view of two or more hosts (None for one)."""
    summaries = sorted(summaries, key=lambda s: s.host)
    if len(summaries) < 2:
        return None
    names = [s.host for s in summaries]
    # Decoded once here (the reduce side), not held as dicts while the map runs.
    collectives = {s.host: s.collectives for s in summaries}
    shared = set.intersection(*(set(table) for table in collectives.values()))
    # Clock offsets from the ends of shared collectives (see the module docstring).
    offsets = {name: 0 for name in names}
    if shared:
        ends = np.array(
            [[collectives[s.host][key][1] for key in sorted(shared)] for s in summaries]
        )
        reference = np.median(ends, axis=0)
        for index, name in enumerate(names):
            offsets[name] = int(np.median(ends[index] - reference))
        alignment = (
            f"host clocks aligned on the ends of {len(shared)} collectives every host ran "
            f"({', '.join(sorted({op for _, op, _ in shared})[:5])}): a collective ends on "
            "every host at the same moment, so each host's offset is the median difference of "
            "its end times from the median host's"
        )
    else:
        alignment = (
            "no collective ran on every host in the same step: host clocks are taken as they "
            "are (lateness includes any clock offset between the machines)"
        )
    steps = sorted(set.intersection(*(set(s.step_windows) for s in summaries)))
    starts = {s.host: {n: s.step_windows[n][0] - offsets[s.host] for n in steps} for s in summaries}
    arrivals: dict[str, dict[int, int]] = {name: {} for name in names}
    waits: dict[int, float] = {}
    for number in steps:
        keys = sorted(key for key in shared if key[0] == number)
        if not keys:
            continue
        first = min(
            keys, key=lambda key: np.median([collectives[s.host][key][0] for s in summaries])
        )
        for s in summaries:
            arrivals[s.host][number] = collectives[s.host][first][0] - offsets[s.host]
        total = 0.0
        for key in keys:
            spans = [collectives[s.host][key][1] - collectives[s.host][key][0] for s in summaries]
            total += sum(d - min(spans) for d in spans) / 1e9
        waits[number] = total
    rows = []
    skew = {}
    for number in steps:
        values = [starts[name][number] for name in names]
        skew[number] = (max(values) - min(values)) / 1e9
    step_medians = []
    for s in summaries:
        durations = [(s.step_windows[n][1] - s.step_windows[n][0]) / 1e9 for n in steps]
        step_medians.append(_median(durations))
        late = {n: (starts[s.host][n] - _median_of(starts, names, n)) / 1e9 for n in steps}
        arrival = {
            n: (arrivals[s.host][n] - _median_of(arrivals, names, n)) / 1e9
            for n in steps
            if n in arrivals[s.host]
        }
        rows.append(
            HostRow(
                host=s.host,
                devices=s.devices,
                step_time_median_s=_median(durations),
                step_time_p90_s=float(np.percentile(durations, 90)) if durations else math.nan,
                late_s=late,
                arrival_late_s=arrival,
                late_median_s=_median(list(late.values())),
                clock_offset_s=offsets[s.host] / 1e9,
                idle_share=(s.span_s - s.busy_s) / s.span_s if s.span_s > 0 else 0.0,
            )
        )
    threshold = max(STRAGGLER_FLOOR_S, STRAGGLER_SHARE * _median(step_medians))
    stragglers = []
    for row in rows:
        row.straggler = bool(row.late_median_s > threshold)
        if row.straggler:
            stragglers.append(row.host)
    return HostsAnalysis(
        hosts=rows,
        steps=steps,
        skew_s=skew,
        wait_s=waits,
        stragglers=stragglers,
        alignment=alignment,
        shared_collectives=sorted({op for _, op, _ in shared}),
    )


def _median_of(table: dict[str, dict[int, int]], names: list[str], step: int) -> float:
    return float(np.median([table[name][step] for name in names if step in table[name]]))
