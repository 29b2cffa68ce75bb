"""GPU device planes: kernels -> op executions (several kernels of one op are one execution);
kernels inside command buffers are kept apart for ``profan.trace.command_buffers``."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
from google.protobuf.message import Message

from profan.trace.command_buffers import COMMAND_BUFFER
from profan.trace.planes import (
    NA_INT,
    PROGRAM_NA,
    HostTrace,
    _line_chunks,
    _line_times,
    _OpColumns,
    _PlaneStats,
)


def read_gpu_plane(
    plane: Message, ordinal: int, trace: HostTrace, ops: _OpColumns, path: str
) -> None:
    stats = _PlaneStats(plane)
    hlo_op = stats.id("hlo_op")
    if hlo_op is None:
        return
    wanted = [
        stats.id(n)
        for n in ("hlo_op", "hlo_module", "program_id", "unique_hlo_op_id")
        if stats.id(n) is not None
    ]
    parts: dict[str, list[np.ndarray]] = defaultdict(list)
    for line in plane.lines:
        if not line.has_events:
            continue
        for events in _line_chunks(line, path, wanted_stats=wanted, require_stats=[hlo_op]):
            if not len(events):
                continue
            count = len(events)
            parts["start"].append(_line_times(line, events, trace.base_ns))
            parts["duration"].append(events.duration_ps)
            parts["name"].append(
                stats.strings(events, "hlo_op", np.full(count, None, dtype=object))
            )
            parts["module"].append(
                stats.strings(events, "hlo_module", np.full(count, None, dtype=object))
            )
            parts["program"].append(
                stats.uints(events, "program_id", np.full(count, PROGRAM_NA, dtype=np.uint64))
            )
            parts["around"].append(
                stats.ints(events, "unique_hlo_op_id", np.full(count, NA_INT, dtype=np.int64))
            )
            keys, inverse = np.unique(events.metadata_id, return_inverse=True)
            kernel_names = [_event_name(plane, int(key)) for key in keys]
            parts["kernel"].append(np.array(kernel_names, dtype=object)[inverse])
    if not parts:
        return
    columns = {name: np.concatenate(values) for name, values in parts.items()}
    order = np.argsort(columns["start"], kind="stable")
    columns = {name: values[order] for name, values in columns.items()}
    in_graph = np.array(
        [isinstance(n, str) and COMMAND_BUFFER.match(n) is not None for n in columns["name"]],
        dtype=bool,
    )
    if in_graph.any():
        # Kernels inside command buffers are attributed once the module is known (load.py).
        graph = trace.graph_kernels
        graph["device"].append(np.full(int(in_graph.sum()), ordinal, dtype=np.int64))
        for name in ("start", "duration", "name", "module", "program", "around", "kernel"):
            graph[name].append(columns[name][in_graph])
    mine = {name: values[~in_graph] for name, values in columns.items()}
    if len(mine["start"]):
        found = _executions(mine)
        ops.add(device=np.full(len(found["start_ps"]), ordinal, dtype=np.int64), **found)


def _event_name(plane: Message, key: int) -> str | None:
    meta = plane.event_metadata.get(key)
    return meta.name if meta is not None else None


def _first_kernels(columns: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """One HLO op may launch several kernels: consecutive kernels (in start order, on one
    device) of the same (module, program, op) are one execution.  Returns the index of each
    execution's first kernel and each kernel's execution number."""
    key = np.array(
        [
            f"{m}\x00{p}\x00{n}"
            for m, p, n in zip(columns["module"], columns["program"], columns["name"], strict=True)
        ]
    )
    new_group = np.ones(len(key), dtype=bool)
    new_group[1:] = key[1:] != key[:-1]
    return np.flatnonzero(new_group), np.cumsum(new_group) - 1


def _executions(columns: dict[str, np.ndarray]) -> dict[str, Any]:
    """Op-execution columns from kernels in start order: an execution's duration is the sum of
    its kernels' durations, its start the first kernel's start."""
    firsts, group = _first_kernels(columns)
    return {
        "module": columns["module"][firsts],
        "program_id": columns["program"][firsts],
        "op_name": columns["name"][firsts],
        "start_ps": columns["start"][firsts],
        "duration_ps": np.bincount(group, weights=columns["duration"]).astype(np.int64),
        "kernel_count": np.bincount(group).astype(np.int64),
    }


def executions_of_kernels(columns: dict[str, np.ndarray], ordinal: int) -> dict[str, np.ndarray]:
    """``_executions`` with the device column, in ``_OpColumns`` layout (for load.py)."""
    builder = _OpColumns()
    found = _executions(columns)
    builder.add(device=np.full(len(found["start_ps"]), ordinal, dtype=np.int64), **found)
    return builder.finish()
