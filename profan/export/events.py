"""Which events of a host's xplane are op executions, and which row of ``Profile.ops`` each is.

The readers (``profan.trace.xplane``, ``profan.trace.gpu``) turn op events into rows of
``Profile.ops`` but keep no pointer back to the event; an export needs one, so events are
joined to rows again here by device and time, which the readers keep exactly:

* TPU: every event of a device plane's ``XLA Ops`` line is one execution, every event of its
  ``Async XLA Ops`` line one async span (``Profile.async_ops``);
* GPU: every event of a device plane holding an ``hlo_op`` stat is a kernel; an execution is
  consecutive kernels of one op, so a kernel belongs to the latest execution that started at or
  before it on its device (the reader's own grouping, seen from the other side);
* CPU (no device planes): every ``/host:CPU`` event holding ``hlo_op`` is one execution of the
  device its ``device_ordinal`` names.

``Profile.ops`` times are seconds since the profile's first op; ``Profile.origin_ns`` is that
instant to the nanosecond, so the picoseconds below it (TPU timestamps have them) are found once
from the data: the offset that puts most events exactly on a row's start.  TPU and CPU events
then match a row with the same start and duration; every row is used once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from profan.trace.space import Plane
from profan.trace.wire import KIND_INT, KIND_UINT, EventArrays, WireError, decode_events

_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)")
HOST_PLANE = "/host:CPU"
TPU_OP_LINE = "XLA Ops"
TPU_SPAN_LINE = "Async XLA Ops"  # async ops from start to done: Profile.async_ops
NO_DEVICE = -1


@dataclass(frozen=True, slots=True)
class PlaneRole:
    """How a plane holds op events: ``kind`` TPU, GPU or CPU; ``device`` its ordinal (CPU: per
    event); the stat ids the decode needs."""

    kind: str
    device: int
    hlo_op: int | None = None
    device_ordinal: int | None = None


@dataclass(slots=True)
class LineOps:
    """The op events of one line: their positions among the line's events and their rows."""

    index: np.ndarray  # int64: position of each op event in the line
    row: np.ndarray  # int64: its row of Profile.ops, -1 where none was found
    start_ps: np.ndarray  # int64: its start, picoseconds since the profile's first op
    duration_ps: np.ndarray  # int64: its own duration (a GPU kernel's, not the execution's)
    device: np.ndarray  # int64: its device ordinal
    metadata_id: np.ndarray  # int64: its event metadata (a GPU kernel's name)
    spans: bool = False  # rows of Profile.async_ops (a TPU's async spans), not Profile.ops


def _stat_id(plane: Plane, name: str) -> int | None:
    for key, meta in plane.stat_metadata.items():
        if meta.name == name:
            return int(key)
    return None


def plane_role(plane: Plane, has_device_planes: bool) -> PlaneRole | None:
    """The role of a plane in a host whose planes include device planes or not."""
    match = _DEVICE_PLANE.match(plane.name)
    if match and match.group(1) == "TPU":
        return PlaneRole("TPU", int(match.group(2)))
    if match:
        hlo_op = _stat_id(plane, "hlo_op")
        return PlaneRole("GPU", int(match.group(2)), hlo_op) if hlo_op is not None else None
    if plane.name == HOST_PLANE and not has_device_planes:
        hlo_op = _stat_id(plane, "hlo_op")
        if hlo_op is not None:
            return PlaneRole("CPU", NO_DEVICE, hlo_op, _stat_id(plane, "device_ordinal"))
    return None


def has_device_planes(planes: list[Plane]) -> bool:
    return any(_DEVICE_PLANE.match(plane.name) for plane in planes)


@dataclass(slots=True)
class _DeviceRows:
    starts: np.ndarray  # sorted, ps since the profile's first op
    durations: np.ndarray
    rows: np.ndarray  # row of Profile.ops of each


@dataclass(slots=True)
class HostRows:
    """One host's rows of ``Profile.ops`` by device, sorted by start."""

    devices: dict[int, _DeviceRows]
    used: np.ndarray  # per row of Profile.ops: already matched to an event

    @classmethod
    def of(cls, ops: pd.DataFrame, host: str, used: np.ndarray) -> HostRows:
        rows = np.flatnonzero((ops["host"].astype(object) == host).to_numpy())
        starts = np.rint(ops["start_s"].to_numpy(dtype=float)[rows] * 1e12).astype(np.int64)
        durations = np.rint(ops["duration_s"].to_numpy(dtype=float)[rows] * 1e12).astype(np.int64)
        device = ops["device"].to_numpy(dtype=np.int64, na_value=NO_DEVICE)[rows]
        devices = {}
        for ordinal in np.unique(device):
            mine = np.flatnonzero(device == ordinal)
            order = mine[np.argsort(starts[mine], kind="stable")]
            devices[int(ordinal)] = _DeviceRows(starts[order], durations[order], rows[order])
        return cls(devices, used)


@dataclass(slots=True)
class Origin:
    """The profile's first op as the events' clock reads it: ``Profile.origin_ns`` plus the
    picoseconds below it, found from the first events matched."""

    ns: int
    residual_ps: int | None = None

    def estimate(self, rel_ps: np.ndarray, device: np.ndarray, rows: HostRows) -> None:
        """The sub-nanosecond part: the offset (0-999 ps) that most events sit above a row's
        start (an exact match sits at the residual itself)."""
        offsets = []
        for ordinal, table in rows.devices.items():
            mine = rel_ps[device == ordinal]
            if not mine.size or not table.starts.size:
                continue
            at = np.searchsorted(table.starts, mine, side="right") - 1
            ok = at >= 0
            offsets.append(mine[ok] - table.starts[at[ok]])
        found = np.concatenate(offsets) if offsets else np.zeros(0, dtype=np.int64)
        found = found[(found >= 0) & (found < 1000)]
        if found.size:
            self.residual_ps = int(np.bincount(found).argmax())


@dataclass(slots=True)
class Matcher:
    """Finds the op events of a host's lines and their rows of ``Profile.ops``."""

    rows: HostRows
    origin: Origin
    spans: HostRows | None = None  # the host's rows of Profile.async_ops, when it has them
    unmatched: int = 0  # op events without a row
    events: int = 0  # op events seen

    def line_ops(
        self, role: PlaneRole, line_name: str, timestamp_ns: int, events: list[bytes]
    ) -> LineOps | None:
        """The op events among a line's serialized events, or None when it holds none."""
        rows, spans = self.rows, False
        if role.kind == "TPU" and line_name == TPU_SPAN_LINE and self.spans is not None:
            rows, spans = self.spans, True
        elif role.kind == "TPU" and line_name != TPU_OP_LINE:
            return None
        decoded = _decode(role, events)
        if decoded is None or not len(decoded):
            return None
        count = len(decoded)
        device = np.full(count, role.device, dtype=np.int64)
        if role.kind == "CPU":
            device[:] = NO_DEVICE
            hit = np.isin(decoded.stat_kind, (KIND_INT, KIND_UINT)) & (
                decoded.stat_metadata_id == role.device_ordinal
            )
            device[decoded.stat_event[hit]] = decoded.stat_int[hit]
        rel = decoded.offset_ps + (timestamp_ns - self.origin.ns) * 1000
        if self.origin.residual_ps is None:
            self.origin.estimate(rel, device, rows)
        rel = rel - (self.origin.residual_ps or 0)
        row = np.full(count, -1, dtype=np.int64)
        for ordinal in np.unique(device):
            table = rows.devices.get(int(ordinal))
            if table is None:
                continue
            mine = np.flatnonzero(device == ordinal)
            if role.kind == "GPU":
                row[mine] = _containing(table, rel[mine])
                rows.used[row[mine][row[mine] >= 0]] = True
            else:
                row[mine] = _exact(table, rel[mine], decoded.duration_ps[mine], rows.used)
        self.events += count
        self.unmatched += int((row < 0).sum())
        return LineOps(
            decoded.index, row, rel, decoded.duration_ps, device, decoded.metadata_id, spans
        )


def _decode(role: PlaneRole, events: list[bytes]) -> EventArrays | None:
    if not events:
        return None
    try:
        if role.kind == "TPU":
            return decode_events(events, wanted_stats=[])
        wanted = [role.device_ordinal] if role.device_ordinal is not None else []
        return decode_events(events, wanted_stats=wanted, require_stats=[role.hlo_op or 0])
    except WireError:
        return None  # a damaged line: the loader reported it; it is copied unannotated


def _exact(
    table: _DeviceRows, starts: np.ndarray, durations: np.ndarray, used: np.ndarray
) -> np.ndarray:
    """Rows with the same start and duration, each used once (ties in the order both the
    reader and the file keep)."""
    low = np.searchsorted(table.starts, starts, side="left")
    high = np.searchsorted(table.starts, starts, side="right")
    out = np.full(len(starts), -1, dtype=np.int64)
    single = np.flatnonzero(high - low == 1)
    fits = table.durations[low[single]] == durations[single]
    candidates = table.rows[low[single[fits]]]
    fresh = ~used[candidates]
    out[single[fits][fresh]] = candidates[fresh]
    used[candidates[fresh]] = True
    for position in np.flatnonzero(out < 0):
        for at in range(int(low[position]), int(high[position])):
            candidate = int(table.rows[at])
            if table.durations[at] == durations[position] and not used[candidate]:
                out[position] = candidate
                used[candidate] = True
                break
    return out


def _containing(table: _DeviceRows, starts: np.ndarray) -> np.ndarray:
    """The execution each kernel belongs to: the latest one started at or before it."""
    at = np.searchsorted(table.starts, starts, side="right") - 1
    return np.where(at >= 0, table.rows[np.maximum(at, 0)], -1)
