"""Which events of a host's xplane are op executions, and which row of ``Profile.ops`` each is.

The readers (``profan.trace.xplane``, ``profan.trace.gpu``) turn op events into rows of
``Profile.ops`` but keep no pointer back to the event; an export needs one, so events are
joined to rows again here by device and time, which the readers keep exactly:

* TPU: every event of a device plane's ``XLA Ops`` line is one execution, every event of its
  ``Async XLA Ops`` line one async span (``Profile.async_ops``), each timed as the reader
  times it (``profan.trace.device_clock``: the device's clock where the events give it);
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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from profan.trace.device_clock import (
    DEVICE_CLOCK_STATS,
    ClockAnchors,
    async_start_name,
    event_times,
    name_codes,
)
from profan.trace.space import Plane, line_events
from profan.trace.wire import KIND_INT, KIND_REF, KIND_UINT, EventArrays, WireError, decode_events

_DEVICE_PLANE = re.compile(r"^/device:(TPU|GPU):(\d+)")
_HLO_LINE_NAME = re.compile(r"^%?([^\s=]+)\s*=")
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
    device_offset: int | None = None  # TPU: the device clock's stats (device_clock)
    device_duration: int | None = None
    # TPU: the op events on both clocks, to time events the host timeline alone dates
    clock: DeviceClock | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DeviceClock:
    """A TPU plane's ``ClockAnchors``, on picoseconds after ``zero_ns``."""

    anchors: ClockAnchors
    zero_ns: int
    op_names: dict[str, int]  # the anchors' name codes
    hlo_op: int | None  # the stat an async span names its done by
    stat_names: dict[int, str]


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
        offset, duration = (_stat_id(plane, name) for name in DEVICE_CLOCK_STATS)
        clock = _device_clock(plane, offset, duration)
        return PlaneRole("TPU", int(match.group(2)), None, None, offset, duration, clock)
    if match:
        hlo_op = _stat_id(plane, "hlo_op")
        return PlaneRole("GPU", int(match.group(2)), hlo_op) if hlo_op is not None else None
    if plane.name == HOST_PLANE and not has_device_planes:
        hlo_op = _stat_id(plane, "hlo_op")
        if hlo_op is not None:
            return PlaneRole("CPU", NO_DEVICE, hlo_op, _stat_id(plane, "device_ordinal"))
    return None


def _device_clock(plane: Plane, offset: int | None, duration: int | None) -> DeviceClock | None:
    """The clock anchors of a TPU plane's ``XLA Ops`` events, as the reader builds them."""
    lines = [line for line in plane.lines if line.name == TPU_OP_LINE and line.has_events]
    if offset is None or duration is None or not lines:
        return None
    zero_ns = min(line.timestamp_ns for line in lines)
    op_names: dict[str, int] = {}
    keys = list(plane.event_metadata)
    names = [plane.event_metadata[k].display_name or plane.event_metadata[k].name for k in keys]
    code_of = dict(zip(keys, name_codes([_op_name(n) for n in names], op_names), strict=False))
    parts = []
    for line in lines:
        try:
            events = decode_events(list(line_events(line, "")), wanted_stats=[offset, duration])
        except WireError:
            continue  # a damaged line: the loader reported it
        times = event_times(events, offset, duration)
        both = times.on_device
        shift = (line.timestamp_ns - zero_ns) * 1000
        parts.append(
            (
                events.offset_ps[both] + shift,
                events.duration_ps[both],
                times.offset_ps[both] + shift,
                times.duration_ps[both],
                np.array([code_of.get(int(k), -1) for k in events.metadata_id[both]]),
            )
        )
    if not parts or not sum(len(part[0]) for part in parts):
        return None
    columns = (np.concatenate(column) for column in zip(*parts, strict=True))
    stat_names = {int(key): meta.name for key, meta in plane.stat_metadata.items()}
    hlo_op = _stat_id(plane, "hlo_op")
    return DeviceClock(ClockAnchors.of(*columns), zero_ns, op_names, hlo_op, stat_names)


def _op_name(metadata_name: str) -> str:
    """An op's name from its event metadata (the reader's rule: the display name, else the
    name the HLO line assigns)."""
    match = _HLO_LINE_NAME.match(metadata_name)
    return match.group(1) if match else metadata_name


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
        offset_ps, duration_ps = _times(role, line_name, timestamp_ns, decoded)
        rel = offset_ps + (timestamp_ns - self.origin.ns) * 1000
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
                row[mine] = _exact(table, rel[mine], duration_ps[mine], rows.used)
        self.events += count
        self.unmatched += int((row < 0).sum())
        return LineOps(decoded.index, row, rel, duration_ps, device, decoded.metadata_id, spans)


def _times(
    role: PlaneRole, line_name: str, timestamp_ns: int, events: EventArrays
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets from the line's timestamp and durations of a line's events, as the reader
    takes them: on a TPU the device's clock, where the events or the plane's ops give it."""
    if role.kind != "TPU":
        return events.offset_ps, events.duration_ps
    times = event_times(events, role.device_offset, role.device_duration)
    if line_name == TPU_OP_LINE or role.clock is None or times.on_device.all():
        return times.offset_ps, times.duration_ps
    shift = (timestamp_ns - role.clock.zero_ns) * 1000
    moved = ~times.on_device
    clock = role.clock
    done = np.full(len(events), -1, dtype=np.int64)
    if line_name == TPU_SPAN_LINE and clock.hlo_op is not None:  # a span names its done
        rows = np.flatnonzero(events.stat_metadata_id == clock.hlo_op)
        names = [
            clock.stat_names.get(int(events.stat_int[row]))
            if events.stat_kind[row] == KIND_REF
            else events.stat_text(int(row)).decode("utf-8", "replace")
            for row in rows
        ]
        done[events.stat_event[rows]] = name_codes(names, clock.op_names)[:-1]
        starts = [None if n is None else async_start_name(n) for n in names]
        begin = np.full(len(events), -1, dtype=np.int64)
        begin[events.stat_event[rows]] = name_codes(starts, clock.op_names)[:-1]
        span_ops = (begin[moved], done[moved])
    else:
        span_ops = None
    start, duration = clock.anchors.spans(
        events.offset_ps[moved] + shift, events.duration_ps[moved], span_ops
    )
    offset_ps, duration_ps = times.offset_ps.copy(), times.duration_ps.copy()
    offset_ps[moved] = start - shift
    duration_ps[moved] = duration
    return offset_ps, duration_ps


def _decode(role: PlaneRole, events: list[bytes]) -> EventArrays | None:
    if not events:
        return None
    try:
        if role.kind == "TPU":
            hlo_op = role.clock.hlo_op if role.clock is not None else None
            clock = [role.device_offset, role.device_duration, hlo_op]
            return decode_events(events, wanted_stats=[s for s in clock if s is not None])
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
