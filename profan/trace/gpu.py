"""GPU device planes: kernels -> op executions; kernels inside command buffers are kept apart
for ``profan.trace.command_buffers``.

One execution of an HLO op may launch several kernels (a cuDNN call: memsets, then the kernel;
a convolution: an im2col, then a GEMM).  Kernels are one execution when they ran on one stream
(line), back to back in that stream's order, for the same (module, program, op), within one
*scope*: what the trace says launched them together.

* NVIDIA (CUPTI): every kernel, memset and memcpy carries ``scope_range_id``, new for each
  execution of an op (each loop iteration too); kernels inside a command buffer share the
  graph launch's.
* ROCm: kernels carry ``correlation_id`` only.  The host launch with that id
  (``hipModuleLaunchKernel``, …, on a "Host Threads" line) lies inside the
  ``GpuExecutable::ExecuteThunks`` span of the module execution that launched it: that span is
  the scope (``HostLaunches``).
* Neither (older ROCm profiles): no scope; kernels back to back on a stream, of one op, are one
  execution, which merges executions of an op that runs twice with nothing between.

A device's streams are never merged: another stream's copy between two kernels of an execution
does not split it, and two streams' kernels of one op are two executions.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from google.protobuf.message import Message

from profan.arrays import among
from profan.escape import terminal
from profan.trace.command_buffers import COMMAND_BUFFER
from profan.trace.kernels import add_parts, kernel_totals
from profan.trace.planes import (
    NA_INT,
    PROGRAM_NA,
    Coded,
    HostTrace,
    _line_chunks,
    _line_times,
    _OpColumns,
    _PlaneStats,
    joined,
)

# The host span of one module execution on GPU (NVIDIA prefixes the device: "[0] GpuExec…").
EXECUTE_THUNKS = "GpuExecutable::ExecuteThunks"


@dataclass(slots=True)
class LaunchScopes:
    """The module execution (a number, the scope) that launched each kernel, by correlation id."""

    correlation: np.ndarray  # int64, sorted, unique
    scope: np.ndarray  # int64: the ExecuteThunks span the launch lies in (NA_INT: none)

    def of(self, correlation: np.ndarray) -> np.ndarray:
        """The scope of each correlation id (NA_INT where no launch has it)."""
        found = np.full(len(correlation), NA_INT, dtype=np.int64)
        if not len(self.correlation) or not len(correlation):
            return found
        at = np.minimum(np.searchsorted(self.correlation, correlation), len(self.correlation) - 1)
        hit = self.correlation[at] == correlation
        found[hit] = self.scope[at[hit]]
        return found


class HostLaunches:
    """The host plane's kernel launches and module executions, read once per host when a GPU
    plane needs them (ROCm: kernels with correlation ids but no scope_range_id)."""

    def __init__(self, plane: Message | None, path: str, base_ns: int) -> None:
        self.plane = plane
        self.path = path
        self.base_ns = base_ns

    @cached_property
    def scopes(self) -> LaunchScopes | None:
        return None if self.plane is None else launch_scopes(self.plane, self.path, self.base_ns)


def launch_scopes(plane: Message, path: str, base_ns: int) -> LaunchScopes | None:
    """Each host launch's module execution: the ``ExecuteThunks`` span it lies in.  Launches
    are recorded on a thread line of their own ("Host Threads/N"), the spans on the executing
    thread's line ("python", "py_xla_execute/…"); with several devices the spans of different
    threads overlap in time, so each launch line is paired with the span line holding most of
    its launches (the same OS thread).  None when the plane has neither."""
    found = _host_events(plane, path, base_ns)
    if found is None:
        return None
    spans, launches = found
    first_scope = np.cumsum([0] + [len(starts) for starts, _ in spans])
    correlation, scope = [], []
    for ids, times in launches:
        best, best_inside, best_index = (
            0,
            np.zeros(len(ids), dtype=bool),
            np.zeros(len(ids), np.int64),
        )
        for number, (starts, ends) in enumerate(spans):
            index = np.searchsorted(starts, times, side="right") - 1
            inside = (index >= 0) & (times <= ends[np.maximum(index, 0)])
            if inside.sum() > best_inside.sum():
                best, best_inside, best_index = number, inside, index
        launched_in = np.full(len(ids), NA_INT, dtype=np.int64)
        launched_in[best_inside] = first_scope[best] + best_index[best_inside]
        correlation.append(ids)
        scope.append(launched_in)
    all_ids, all_scopes = np.concatenate(correlation), np.concatenate(scope)
    order = np.argsort(all_ids, kind="stable")
    all_ids, all_scopes = all_ids[order], all_scopes[order]
    unique, first, counts = np.unique(all_ids, return_index=True, return_counts=True)
    # an id launched twice (ids are per process; never seen) says nothing: no scope
    return LaunchScopes(unique, np.where(counts == 1, all_scopes[first], NA_INT))


Columns = tuple[np.ndarray, np.ndarray]


def _host_events(
    plane: Message, path: str, base_ns: int
) -> tuple[list[Columns], list[Columns]] | None:
    """Per line of the host plane that has them: the ExecuteThunks spans (starts, ends; sorted
    by start) and the launches (correlation ids, times).  None when either is missing."""
    stats = _PlaneStats(plane)
    correlation_id = stats.id("correlation_id")
    thunk_ids = [k for k, m in plane.event_metadata.items() if m.name.endswith(EXECUTE_THUNKS)]
    if correlation_id is None or not thunk_ids:
        return None
    # the spans hold module_name, the launches correlation_id: no other event is decoded
    require = [correlation_id] + [s for s in [stats.id("module_name")] if s is not None]
    spans: list[Columns] = []
    launches: list[Columns] = []
    for line in plane.lines:
        if not line.has_events:
            continue
        line_spans: list[Columns] = []
        line_launches: list[Columns] = []
        for events in _line_chunks(
            line, path, wanted_stats=[correlation_id], require_stats=require
        ):
            start = _line_times(line, events, base_ns)
            thunk = among(events.metadata_id, thunk_ids)
            line_spans.append((start[thunk], start[thunk] + events.duration_ps[thunk]))
            ids = stats.ints(events, "correlation_id", np.full(len(events), NA_INT, np.int64))
            launched = ~thunk & (ids != NA_INT)
            line_launches.append((ids[launched], start[launched]))
        if not line_spans:
            continue
        starts, ends = (np.concatenate(c) for c in zip(*line_spans, strict=True))
        if len(starts):
            order = np.argsort(starts, kind="stable")
            spans.append((starts[order], ends[order]))
        ids, times = (np.concatenate(c) for c in zip(*line_launches, strict=True))
        if len(ids):
            launches.append((ids, times))
    return (spans, launches) if spans and launches else None


def read_gpu_plane(
    plane: Message,
    ordinal: int,
    trace: HostTrace,
    ops: _OpColumns,
    path: str,
    host: HostLaunches | None = None,
) -> None:
    stats = _PlaneStats(plane)
    hlo_op = stats.id("hlo_op")
    if hlo_op is None:
        return
    by_scope_range = stats.id("scope_range_id") is not None
    launches = None
    if not by_scope_range and stats.id("correlation_id") is not None and host is not None:
        launches = host.scopes
    names = ["hlo_op", "hlo_module", "program_id", "unique_hlo_op_id"]
    names.append("scope_range_id" if by_scope_range else "correlation_id")
    names.append("kernel_details")
    wanted = [stats.id(n) for n in names if stats.id(n) is not None]
    parts: dict[str, list[Any]] = {name: [] for name in _KERNEL_COLUMNS}
    for number, line in enumerate(plane.lines):
        if not line.has_events:
            continue
        for events in _line_chunks(line, path, wanted_stats=wanted, require_stats=[hlo_op]):
            if not len(events):
                continue
            count = len(events)
            parts["line"].append(np.full(count, number, dtype=np.int64))
            parts["start"].append(_line_times(line, events, trace.base_ns))
            parts["duration"].append(events.duration_ps)
            parts["name"].append(stats.coded(events, "hlo_op"))
            parts["module"].append(stats.coded(events, "hlo_module"))
            parts["program"].append(
                stats.uints(events, "program_id", np.full(count, PROGRAM_NA, dtype=np.uint64))
            )
            parts["around"].append(
                stats.ints(events, "unique_hlo_op_id", np.full(count, NA_INT, dtype=np.int64))
            )
            parts["scope"].append(_scopes(stats, events, by_scope_range, launches))
            parts["kernel_id"].append(events.metadata_id)
            parts["details"].append(stats.coded(events, "kernel_details"))
    if not parts["start"]:
        return
    columns = {name: joined(values) for name, values in parts.items()}
    names_coded: Coded = columns["name"]
    in_graph_name = np.array(
        [isinstance(n, str) and COMMAND_BUFFER.match(n) is not None for n in names_coded.values]
        + [False],
        dtype=bool,
    )
    in_graph = in_graph_name[names_coded.codes]
    # each kernel's name: its event's (one lookup per distinct kernel)
    kernel_ids, kernel_of = np.unique(columns["kernel_id"], return_inverse=True)
    kernel_names = [_event_name(plane, int(key)) for key in kernel_ids]
    columns["kernel"] = Coded.by_key(kernel_names, kernel_of)
    if in_graph.any():
        # Kernels inside command buffers are attributed once the module is known (load.py).
        rows = np.flatnonzero(in_graph)
        graph = trace.graph_kernels
        graph["device"].append(np.full(len(rows), ordinal, dtype=np.int64))
        for name in ("start", "duration", "program", "around", "line", "scope"):
            graph[name].append(columns[name][rows])
        graph["name"].append(names_coded.take(rows).objects())
        for name in ("module", "kernel", "details"):
            graph[name].append(columns[name].take(rows).objects())
    # an hlo_op stat that names nothing (a reference to no stat metadata, a damaged compressed
    # string) leaves the kernel no op to be an execution of: it is left out, and said so
    nameless = int((names_coded.codes < 0).sum())
    if nameless:
        note = (
            f"{plane.name}: {nameless} kernel(s) whose hlo_op stat names nothing (a reference to "
            "no stat metadata, or a damaged compressed string): not counted as op executions"
        )
        trace.notes.append(terminal(note))
    rows = np.flatnonzero(~in_graph & (names_coded.codes >= 0))
    if len(rows):
        mine = {
            name: values.take(rows) if isinstance(values, Coded) else values[rows]
            for name, values in columns.items()
        }
        found = _executions(mine)
        ops.add(device=np.full(len(found["start_ps"]), ordinal, dtype=np.int64), **found)
        add_parts(trace.kernels, kernel_totals(mine, ordinal))


_KERNEL_COLUMNS = (
    "line",
    "start",
    "duration",
    "name",
    "module",
    "program",
    "around",
    "scope",
    "kernel_id",
    "details",
)


def _scopes(
    stats: _PlaneStats, events: Any, by_scope_range: bool, launches: LaunchScopes | None
) -> np.ndarray:
    """Each kernel's scope (NA_INT: none known)."""
    count = len(events)
    if by_scope_range:
        return stats.ints(events, "scope_range_id", np.full(count, NA_INT, dtype=np.int64))
    if launches is None:
        return np.full(count, NA_INT, dtype=np.int64)
    return launches.of(stats.ints(events, "correlation_id", np.full(count, NA_INT, np.int64)))


def _event_name(plane: Message, key: int) -> str | None:
    meta = plane.event_metadata.get(key)
    return meta.name if meta is not None else None


def _identity(values: Any) -> np.ndarray:
    """A column to compare row by row: a ``Coded`` column's codes, else the values."""
    return values.codes if isinstance(values, Coded) else values


def _executions(columns: dict[str, Any]) -> dict[str, Any]:
    """Op-execution columns from kernels: per line, in start order, back-to-back kernels of one
    (scope, module, program, op) are one execution (``line``/``scope`` absent: one line, no
    scope).  An execution's duration is the sum of its kernels' durations (the time the stream
    spent on it), its start the first kernel's start; executions come in start order."""
    count = len(columns["start"])
    if not count:
        columns = {name: columns[name] for name in ("start", "duration", "module", "program")}
        empty = np.zeros(0, dtype=np.int64)
        return {"start_ps": empty, "duration_ps": empty, "kernel_count": empty}
    line = columns.get("line", np.zeros(count, dtype=np.int64))
    order = np.lexsort((columns["start"], line))
    new = np.zeros(count, dtype=bool)
    new[:1] = True
    keys = [line, columns.get("scope"), columns["module"], columns["program"], columns["name"]]
    for key in keys:
        if key is None:
            continue
        held = _identity(key)[order]
        new[1:] |= held[1:] != held[:-1]
    firsts = order[new]
    starts = np.flatnonzero(new)
    by_start = np.argsort(columns["start"][firsts], kind="stable")

    def take(values: Any) -> Any:
        return (
            values.take(firsts[by_start]) if isinstance(values, Coded) else values[firsts][by_start]
        )

    return {
        "module": take(columns["module"]),
        "program_id": take(columns["program"]),
        "op_name": take(columns["name"]),
        "start_ps": take(columns["start"]),
        "duration_ps": np.add.reduceat(columns["duration"][order], starts)[by_start],
        "kernel_count": np.diff(np.append(starts, count))[by_start].astype(np.int64),
    }


def executions_of_kernels(columns: dict[str, np.ndarray], ordinal: int) -> dict[str, np.ndarray]:
    """``_executions`` of one device's kernels (columns ``start``, ``duration``, ``module``,
    ``program``, ``name``; ``line`` and ``scope`` where known), with the device column, in
    ``_OpColumns`` layout (for load.py: kernels inside command buffers)."""
    builder = _OpColumns()
    found = _executions(columns)
    builder.add(device=np.full(len(found["start_ps"]), ordinal, dtype=np.int64), **found)
    return builder.finish()
