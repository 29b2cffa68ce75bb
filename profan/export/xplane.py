"""An annotated copy of one host's ``.xplane.pb``: every op event carries profan's figures as
XStats, so XProf/TensorBoard's trace viewer shows them when the event is clicked.

The copy is written plane by plane and line by line at the protobuf wire level, never decoding
an event into a message: a line's events stay the bytes the profiler wrote, and each op event
gets its stats appended (a repeated field may be continued anywhere in a message, so appended
``XStat``s are simply more of the event's ``stats``).  Stat names and string values go into the
plane's ``stat_metadata`` (string values as ``ref_value``s, XProf's own way of interning
strings), with ids above every id the plane already uses.  Everything else — other planes,
lines, events, metadata, the space's host names and errors — is copied unchanged; the input is
only read.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from google.protobuf.message import Message

from profan.errors import TraceError
from profan.export.events import Matcher, has_device_planes, plane_role
from profan.export.exportable import Executions, Exportable
from profan.export.figures import EFFICIENCY, UNKNOWN, Figures, op_args
from profan.trace.schema import load_schema
from profan.trace.space import Plane, open_stream, read_planes
from profan.trace.storage import as_path
from profan.trace.wire import encode_varint
from profan.trace.xplane import read_bytes

# Wire tags: XSpace.planes, XPlane.lines, XEvent.stats; XStat fields.
_SPACE_PLANE = 0x0A
_PLANE_LINE = 0x1A
_EVENT_STAT = 0x22
_STAT_ID = 0x08
_STAT_DOUBLE = 0x11
_STAT_REF = 0x38
_LENGTH_WIDTH = 5  # bytes of a plane's length prefix, written before its size is known


@dataclass(slots=True)
class Annotated:
    """What one host's copy holds: op events seen, and how many got profan's figures."""

    events: int = 0
    annotated: int = 0


class _PlaneNames:
    """Stat metadata ids of one plane: existing names keep their id; new names get ids above
    all existing ones and are added to the plane's ``stat_metadata``."""

    def __init__(self, view: Message) -> None:
        self.view = view
        self.ids: dict[str, int] = {}
        for key, meta in view.stat_metadata.items():
            self.ids.setdefault(meta.name, int(key))
        self.next_id = max((int(key) for key in view.stat_metadata), default=0) + 1

    def id(self, name: str) -> int:
        found = self.ids.get(name)
        if found is None:
            found = self.ids[name] = self.next_id
            meta = self.view.stat_metadata[found]
            meta.id, meta.name = found, name
            self.next_id += 1
        return found


def _stat(names: _PlaneNames, name: str, value: float | str) -> bytes:
    """One serialized ``XEvent.stats`` entry: a double, or a string as a ref."""
    body = bytes([_STAT_ID]) + encode_varint(names.id(name))
    if isinstance(value, str):
        body += bytes([_STAT_REF]) + encode_varint(names.id(value))
    else:
        body += bytes([_STAT_DOUBLE]) + struct.pack("<d", value)
    return bytes([_EVENT_STAT]) + encode_varint(len(body)) + body


class _PlaneStats:
    """The bytes appended to the op events of one plane: the op's constant figures (built once
    per op) and the execution's efficiency (encoded for a whole line at once)."""

    def __init__(self, view: Message, figures: Figures) -> None:
        self.names = _PlaneNames(view)
        self.figures = figures
        self.by_op: dict[int, bytes] = {}

    def _constant(self, op_index: int) -> bytes:
        found = self.by_op.get(op_index)
        if found is None:
            op = self.figures.ops[op_index]
            found = b"".join(_stat(self.names, name, value) for name, value in op_args(op))
            self.by_op[op_index] = found
        return found

    def of_rows(self, rows: np.ndarray, table: Executions) -> list[bytes | None]:
        """What to append to each event of these rows of ``table`` (None: no row or no op,
        nothing to append)."""
        known = rows >= 0
        op_index = np.full(len(rows), -1, dtype=np.int64)
        op_index[known] = table.figures.row_op[rows[known]]
        efficiency = np.full(len(rows), np.nan)
        efficiency[known] = table.efficiencies[rows[known]]
        # every finite efficiency is the same stat but its 8 bytes: one prefix, then the double
        prefix = _stat(self.names, EFFICIENCY, 0.0)[:-8]
        width = len(prefix) + 8
        encoded = np.empty((len(rows), width), dtype=np.uint8)
        encoded[:, : len(prefix)] = np.frombuffer(prefix, dtype=np.uint8)
        encoded[:, len(prefix) :] = (
            np.nan_to_num(efficiency).astype("<f8").view(np.uint8).reshape(-1, 8)
        )
        blob = encoded.tobytes()
        unknown = _stat(self.names, EFFICIENCY, UNKNOWN)
        constants = {int(i): self._constant(int(i)) for i in np.unique(op_index) if i >= 0}
        return [
            None
            if op < 0
            else constants[op] + (blob[k * width : (k + 1) * width] if finite else unknown)
            for k, (op, finite) in enumerate(
                zip(op_index.tolist(), np.isfinite(efficiency).tolist(), strict=True)
            )
        ]


def _field(tag: int, payload: bytes) -> bytes:
    return bytes([tag]) + encode_varint(len(payload)) + payload


def _padded_varint(value: int) -> bytes:
    """``value`` as a varint of exactly ``_LENGTH_WIDTH`` bytes (continuation bits on the
    leading ones: a valid, if not minimal, encoding every protobuf parser reads)."""
    out = bytearray()
    for _ in range(_LENGTH_WIDTH - 1):
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    if value > 0x7F:
        raise ValueError("an XPlane of 32 GiB or more")
    out.append(value)
    return bytes(out)


def _write_plane(
    out: IO[bytes],
    plane: Plane,
    device_planes: bool,
    matcher: Matcher,
    export: Exportable,
    count: Annotated,
) -> None:
    """One plane, annotated, written line by line: its length is filled in afterwards (so no
    more than one line is held), and its other fields follow its lines (they hold the stat
    metadata the annotations add)."""
    view = plane.view
    stats = _PlaneStats(view, export.figures)
    role = plane_role(plane, device_planes)
    schema = load_schema("xplane.proto")
    out.write(bytes([_SPACE_PLANE]))
    length_at = out.tell()
    out.write(_padded_varint(0))
    for line in plane.lines:
        line.stream.seek(line.start)
        raw = line.stream.read(line.end - line.start)
        found = None
        if role is not None and line.has_events:
            line_message = schema["tensorflow.profiler.XLineView"].FromString(raw)
            events = list(line_message.events)
            found = matcher.line_ops(role, line.name, line.timestamp_ns, events)
        if found is not None:
            count.events += len(found.index)
            extras = stats.of_rows(found.row, export.table(found.spans))
            for position, extra in zip(found.index.tolist(), extras, strict=True):
                if extra is not None:
                    events[position] += extra
                    count.annotated += 1
            line_message.ClearField("events")
            line_message.events.extend(events)
            raw = line_message.SerializeToString()
            del line_message, events
        out.write(_field(_PLANE_LINE, raw))
        del raw
    out.write(view.SerializeToString())  # with the stat metadata the annotations added
    end = out.tell()
    out.seek(length_at)
    out.write(_padded_varint(end - length_at - _LENGTH_WIDTH))
    out.seek(end)


def _top_level_fields(stream: IO[bytes]) -> Iterator[tuple[int, int, int]]:
    """(tag, start, end) of each field of the XSpace in ``stream`` (only length-delimited
    fields occur there: planes, errors, warnings, host names)."""
    stream.seek(0, os.SEEK_END)
    end = stream.tell()
    pos = 0
    while pos < end:
        stream.seek(pos)
        head = stream.read(min(16, end - pos))
        tag, at = _varint(head, 0)
        if tag & 7 != 2:
            raise TraceError(getattr(stream, "name", "xplane"), f"unexpected field tag {tag}")
        size, at = _varint(head, at)
        yield tag, pos + at, pos + at + size
        pos += at + size


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while pos < len(data):
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        if byte < 0x80:
            return value, pos
        shift += 7
    raise ValueError("truncated varint")


def write_annotated(source: str, target: Path, export: Exportable, host: str) -> Annotated:
    """Write ``source`` (the xplane of ``host``) to ``target`` with profan's figures on its op
    events."""
    matcher = export.matcher(host)
    count = Annotated()
    with _open(source) as stream, open(target, "wb") as out:
        planes = read_planes(stream, source)
        device_planes = has_device_planes(planes)
        index = 0
        for tag, start, end in _top_level_fields(stream):
            if tag == _SPACE_PLANE:
                _write_plane(out, planes[index], device_planes, matcher, export, count)
                index += 1
            else:
                stream.seek(start)
                out.write(_field(tag, stream.read(end - start)))
    return count


@contextmanager
def _open(source: str) -> Iterator[IO[bytes]]:
    """The xplane as a seekable stream: a local uncompressed file itself (read with seeks),
    else its bytes (decompressed or downloaded) in memory."""
    file = as_path(source)
    try:
        local = isinstance(file, Path) and not _gzipped(file)
        stream = open_stream(None if local else read_bytes(file), source if local else None)
    except OSError as error:
        raise TraceError(source, f"cannot read: {error.strerror}") from None
    with stream:
        yield stream


def _gzipped(file: Path) -> bool:
    with open(file, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"
