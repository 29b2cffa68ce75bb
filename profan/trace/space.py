"""One host's XSpace read plane by plane and line by line, never whole.

Decoding the whole ``XSpaceView`` at once keeps every line's events in the protobuf arena
(about 1.7x the file) for as long as the host is read, on top of the file's bytes.  Here the file
is walked at the wire level instead (a handful of planes and a few dozen lines: a short Python
loop): each plane is decoded without its lines (``XPlaneView`` of its other fields: name, stats,
metadata), and each line's events are decoded only when its reader asks for them, then dropped.
A local, uncompressed file is read with seeks, so only one line's bytes are in memory at a time;
a compressed or remote file is decompressed / downloaded into memory first and walked there.

Wire facts used: every field is ``tag = number << 3 | wire_type`` as a varint; length-delimited
fields (type 2) are a varint length and that many bytes.  ``XSpace``: 1 planes.  ``XPlane``:
3 lines (everything else is kept for the plane's view).  ``XLine``: 2 name, 3 timestamp_ns,
4 events; serializers write fields by number, so a line's name and timestamp precede its events
(``profan.trace.wire`` relies on the same order inside events).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import IO, Any

from google.protobuf.message import DecodeError, Message

from profan.errors import TraceError
from profan.trace.schema import load_schema

DAMAGED = "not a readable XSpace protobuf (damaged or truncated?)"


class _Damaged(ValueError):
    pass


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _Damaged("a varint runs past its field")
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos += 1
        shift += 7
        if byte < 0x80:
            return value, pos


def _field_at(stream: IO[bytes], pos: int, end: int) -> tuple[int, int, int, int]:
    """The field starting at ``pos``: (number, wire type, value or content start, field end)."""
    stream.seek(pos)
    head = stream.read(min(20, end - pos))
    tag, at = _varint(head, 0)
    number, wire = tag >> 3, tag & 7
    if number == 0:  # no message has a field 0: not protobuf (40 MB of zeros stops here at once)
        raise _Damaged(f"field number 0 at byte {pos}")
    if wire == 0:
        value, at = _varint(head, at)
        return number, wire, value, pos + at
    if wire == 2:
        size, at = _varint(head, at)
        start = pos + at
        if start + size > end:
            raise _Damaged(f"field {number} runs past the end of its message")
        return number, wire, start, start + size
    if wire in (1, 5):
        width = 8 if wire == 1 else 4
        if pos + at + width > end:
            raise _Damaged(f"field {number} runs past the end of its message")
        return number, wire, 0, pos + at + width
    raise _Damaged(f"wire type {wire} of field {number} at byte {pos}")


@dataclass(slots=True)
class Line:
    """One XLine: its name and timestamp at hand, its events decoded on demand."""

    stream: IO[bytes]
    start: int
    end: int
    name: str = ""
    timestamp_ns: int = 0
    has_events: bool = False

    @property
    def events(self) -> Any:
        """The line's serialized events (decodes the line's bytes each time it is asked)."""
        self.stream.seek(self.start)
        data = self.stream.read(self.end - self.start)
        view = load_schema("xplane.proto")["tensorflow.profiler.XLineView"].FromString(data)
        return view.events


@dataclass(slots=True)
class Plane:
    """One XPlane: the ``XPlaneView`` of everything but its lines, and its lines."""

    view: Message
    lines: list[Line] = field(default_factory=list)
    # names of lines left out as byte-for-byte copies of an earlier line (``_without_copies``)
    copies: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.view.name

    def __getattr__(self, name: str) -> Any:  # id, stats, event_metadata, stat_metadata
        return getattr(self.view, name)


def _line(stream: IO[bytes], start: int, end: int) -> Line:
    line = Line(stream, start, end)
    pos = start
    while pos < end:
        number, wire, value, after = _field_at(stream, pos, end)
        if number == 4 and wire == 2:
            line.has_events = True
            break  # the name and timestamp came before (fields are written by number)
        if number == 2 and wire == 2:
            stream.seek(value)
            line.name = stream.read(after - value).decode("utf-8")
        elif number == 3 and wire == 0:
            line.timestamp_ns = value - (1 << 64) if value >= 1 << 63 else value
        pos = after
    return line


def _plane(stream: IO[bytes], start: int, end: int) -> Plane:
    lines: list[Line] = []
    rest: list[bytes] = []
    pos = start
    while pos < end:
        number, wire, value, after = _field_at(stream, pos, end)
        if number == 3 and wire == 2:
            lines.append(_line(stream, value, after))
        else:
            stream.seek(pos)
            rest.append(stream.read(after - pos))
        pos = after
    view = load_schema("xplane.proto")["tensorflow.profiler.XPlaneView"].FromString(b"".join(rest))
    kept, copies = _without_copies(stream, lines)
    return Plane(view, kept, copies)


def _line_bytes(stream: IO[bytes], line: Line) -> bytes:
    stream.seek(line.start)
    return stream.read(line.end - line.start)


def _without_copies(stream: IO[bytes], lines: list[Line]) -> tuple[list[Line], list[str]]:
    """The plane's lines without those that repeat an earlier one byte for byte, and the names
    of those left out.  Lines of one id are one timeline (xplane.proto), so a second line with
    the same id, name, timestamp and events adds each event a second time: a copy (a damaged or
    badly merged file), never more work.  Only lines of equal size, name and timestamp are read
    to compare them."""
    by_shape: dict[tuple[int, str, int], list[Line]] = {}
    kept: list[Line] = []
    copies: list[str] = []
    for line in lines:
        same_shape = by_shape.setdefault((line.end - line.start, line.name, line.timestamp_ns), [])
        if line.has_events and same_shape:
            data = _line_bytes(stream, line)
            if any(_line_bytes(stream, other) == data for other in same_shape):
                copies.append(line.name)
                continue
        same_shape.append(line)
        kept.append(line)
    return kept, copies


def read_planes(stream: IO[bytes], path: str) -> list[Plane]:
    """The planes of the XSpace in ``stream`` (which must stay open while lines are read)."""
    stream.seek(0, io.SEEK_END)
    end = stream.tell()
    if not end:
        raise TraceError(path, "the file is empty")
    planes = []
    pos = 0
    try:
        while pos < end:
            number, wire, value, after = _field_at(stream, pos, end)
            if number == 1 and wire == 2:
                planes.append(_plane(stream, value, after))
            pos = after
    except (_Damaged, DecodeError, UnicodeDecodeError) as error:
        raise TraceError(path, f"{DAMAGED}: {error}") from None
    if not planes:
        raise TraceError(path, "the XSpace holds no planes")
    return planes


def line_events(line: Line, path: str) -> Any:
    """``line.events``, with a damaged line reported as the file's ``TraceError``."""
    try:
        return line.events
    except DecodeError as error:
        raise TraceError(path, f"{DAMAGED}: line {line.name!r}: {error}") from None


def open_stream(data: bytes | None, local: str | None) -> IO[bytes]:
    """A seekable stream over the file: the local file itself, or bytes already in memory."""
    if data is not None:
        return io.BytesIO(data)
    assert local is not None
    return open(local, "rb")
