"""What every plane reader shares: ``HostTrace`` (one host's columns), stat lookups over decoded
events, and the column builder.  Readers: ``xplane`` (TPU, CPU host, metadata), ``gpu``."""

from __future__ import annotations

import zlib
from collections import defaultdict
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from google.protobuf.message import Message

from profan.arrays import among, distinct
from profan.errors import TraceError
from profan.gunzip import gunzip
from profan.trace.bounds import EventBound
from profan.trace.space import line_events
from profan.trace.wire import (
    KIND_DOUBLE,
    KIND_GZIP,
    KIND_INT,
    KIND_REF,
    KIND_STR,
    KIND_UINT,
    EventArrays,
    WireError,
    decode_events,
)

# Columns of HostTrace.ops (numpy arrays or object arrays, one entry per op execution).
NA_INT = -(2**63)
PROGRAM_NA = np.uint64(2**64 - 1)  # program ids are uint64 (TPU ids use all 64 bits)


@dataclass(slots=True)
class Coded:
    """A column of strings as one code per row into ``values`` (code -1: none): how the readers
    build the string columns of op events (an event's op and module name are stat references
    into a few hundred names), and how a read sends them between processes
    (``profan.trace.workers``)."""

    codes: np.ndarray  # int32
    values: list[Any]

    def __len__(self) -> int:
        return len(self.codes)

    @classmethod
    def by_key(cls, values: list[Any], inverse: np.ndarray) -> Coded:
        """``values[inverse]``, coded (``values``: one per key, None for none)."""
        coder = _Coder()
        table = np.append(coder.codes(values), np.int32(-1))
        return cls(table[inverse] if len(inverse) else np.zeros(0, dtype=np.int32), coder.values)

    def take(self, rows: np.ndarray) -> Coded:
        return Coded(self.codes[rows], self.values)

    def objects(self) -> np.ndarray:
        """The column as an object array (None where there is no value)."""
        table = np.empty(len(self.values) + 1, dtype=object)
        table[: len(self.values)] = self.values
        return table[self.codes]

    def used(self) -> list[Any]:
        """The values some row has."""
        counts = np.bincount(self.codes + 1, minlength=len(self.values) + 1)
        return [self.values[code] for code in np.flatnonzero(counts[1:])]


def joined(pieces: list[Any]) -> Any:
    """One column of parts in order: numpy arrays concatenated, ``Coded`` parts as one
    ``Coded``, a string column with an object-array part as an object array."""
    if all(isinstance(piece, Coded) for piece in pieces):
        return _strings(pieces, coded=True)
    if any(isinstance(piece, Coded) for piece in pieces):
        return _strings(pieces, coded=False)
    return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)


class _Coder:
    """Codes for the values met so far (``Coded``'s table, built as they come)."""

    def __init__(self, values: list[Any] | None = None) -> None:
        self.values: list[Any] = list(values or ())
        self.index = {value: code for code, value in enumerate(self.values)}

    def code(self, value: Any) -> int:
        if value is None:
            return -1
        found = self.index.get(value)
        if found is None:
            found = self.index[value] = len(self.values)
            self.values.append(value)
        return found

    def codes(self, values: Any) -> np.ndarray:
        """The code of each of ``values``, as int32."""
        return np.fromiter(map(self.code, values), dtype=np.int32, count=len(values))


@dataclass(slots=True)
class HostTrace:
    """What one host's file recorded, as plain arrays (cheap to send between processes)."""

    host: str
    path: str
    kind: str | None = None  # "TPU" | "GPU" | "CPU"
    base_ns: int = 0  # op start times are picoseconds after this (ns since the epoch)
    devices: dict[int, dict[str, Any]] = field(default_factory=dict)  # plane stats per device
    ops: dict[str, np.ndarray] = field(default_factory=dict)
    async_ops: dict[str, np.ndarray] = field(default_factory=dict)
    module_runs: dict[str, np.ndarray] = field(default_factory=dict)  # TPU "XLA Modules"
    step_marks: list[tuple[int, int, int, str]] = field(default_factory=list)
    hlo_protos: dict[int, tuple[str, bytes]] = field(default_factory=dict)  # program id ->
    module_names: dict[int, str] = field(default_factory=dict)  # program id -> module name
    # GPU kernels that ran inside command buffers (hlo_op ``command_buffer_N``), not yet
    # attributed to instructions: column name -> one array per device plane.
    graph_kernels: dict[str, list[np.ndarray]] = field(default_factory=lambda: defaultdict(list))
    # GPU kernels summed per (device, module, program, op, kernel, details): column name -> one
    # array per device plane (``profan.trace.kernels.KERNEL_PARTS``)
    kernels: dict[str, list[np.ndarray]] = field(default_factory=lambda: defaultdict(list))
    notes: list[str] = field(default_factory=list)
    host_launches: int = 0  # /host:CPU events with hlo_op beside device planes (not ops)
    planes: list[str] = field(default_factory=list)  # plane names, for error messages


def _stat_value(stat: Message, names: dict[int, str]) -> Any:
    which = stat.WhichOneof("value")
    if which is None:
        return None
    value = getattr(stat, which)
    if which == "ref_value":
        return names.get(value)
    if which == "compressed_str_value":
        try:
            return gunzip(value).decode("utf-8", "replace")
        except (EOFError, ValueError, zlib.error):  # damaged, or a bomb (GunzipLimitError)
            return None
    return value


def plane_stats(plane: Message) -> dict[str, Any]:
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    return {
        names.get(s.metadata_id, str(s.metadata_id)): _stat_value(s, names) for s in plane.stats
    }


class _PlaneStats:
    """Stat ids of one plane and vectorised lookups of stat values in decoded events."""

    def __init__(self, plane: Message) -> None:
        self.names = {key: meta.name for key, meta in plane.stat_metadata.items()}
        self.ids: dict[str, int] = {}
        for key, name in self.names.items():
            self.ids.setdefault(name, key)

    def id(self, name: str) -> int | None:
        return self.ids.get(name)

    def _rows(self, events: EventArrays, name: str) -> np.ndarray:
        stat_id = self.ids.get(name)
        if stat_id is None:
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(events.stat_metadata_id == stat_id)

    def ints(self, events: EventArrays, name: str, default: np.ndarray) -> np.ndarray:
        rows = self._rows(events, name)
        out = default
        if rows.size:
            kind = events.stat_kind[rows]
            good = among(kind, (KIND_INT, KIND_UINT, KIND_REF))
            out[events.stat_event[rows[good]]] = events.stat_int[rows[good]]
            doubles = rows[kind == KIND_DOUBLE]
            out[events.stat_event[doubles]] = events.stat_double[doubles].astype(np.int64)
        return out

    def uints(self, events: EventArrays, name: str, out: np.ndarray) -> np.ndarray:
        """Unsigned values (program ids) into a uint64 array."""
        rows = self._rows(events, name)
        if rows.size:
            kind = events.stat_kind[rows]
            good = rows[among(kind, (KIND_INT, KIND_UINT, KIND_REF))]
            out[events.stat_event[good]] = events.stat_int[good].view(np.uint64)
        return out

    def floats(self, events: EventArrays, name: str, out: np.ndarray) -> np.ndarray:
        rows = self._rows(events, name)
        if rows.size:
            kind = events.stat_kind[rows]
            whole = rows[among(kind, (KIND_INT, KIND_UINT))]
            out[events.stat_event[whole]] = events.stat_int[whole].astype(np.float64)
            doubles = rows[kind == KIND_DOUBLE]
            out[events.stat_event[doubles]] = events.stat_double[doubles]
        return out

    def coded(self, events: EventArrays, name: str, base: Coded | None = None) -> Coded:
        """``strings`` as codes: the stat's values (str, ref or compressed), where present,
        over ``base`` (none where absent)."""
        count = len(events)
        coder = _Coder(base.values if base is not None else None)
        rows = self._rows(events, name)
        if base is None:
            codes = np.full(count, -1, dtype=np.int32)
        else:
            codes = base.codes.copy() if rows.size else base.codes
        if not rows.size:
            return Coded(codes, coder.values)
        kind = events.stat_kind[rows]
        refs = rows[kind == KIND_REF]
        if refs.size:
            ref_ids, inverse = distinct(events.stat_int[refs])
            table = coder.codes([self.names.get(int(i)) for i in ref_ids])
            codes[events.stat_event[refs]] = table[inverse]
        for row in rows[among(kind, (KIND_STR, KIND_GZIP))]:
            text = self._text(events, int(row))
            if text is not None:
                codes[events.stat_event[row]] = coder.code(text)
        return Coded(codes, coder.values)

    @staticmethod
    def _text(events: EventArrays, row: int) -> str | None:
        """A string or compressed-string stat's text (None: a compressed one that is damaged)."""
        raw = events.stat_text(row)
        if events.stat_kind[row] == KIND_GZIP:
            try:
                raw = gunzip(raw)
            except (EOFError, ValueError, zlib.error):  # damaged, or a bomb (GunzipLimitError)
                return None
        return raw.decode("utf-8", "replace")

    def strings(self, events: EventArrays, name: str, out: np.ndarray) -> np.ndarray:
        """String values (str, ref or compressed) into an object array (None where absent)."""
        rows = self._rows(events, name)
        if not rows.size:
            return out
        kind = events.stat_kind[rows]
        refs = rows[kind == KIND_REF]
        if refs.size:
            ref_ids, inverse = distinct(events.stat_int[refs])
            names = np.array([self.names.get(int(i)) for i in ref_ids], dtype=object)
            out[events.stat_event[refs]] = names[inverse]
        for row in rows[among(kind, (KIND_STR, KIND_GZIP))]:
            text = self._text(events, int(row))
            if text is not None:
                out[events.stat_event[row]] = text
        return out


def _metadata_stats(plane: Message, wanted: tuple[str, ...]) -> dict[int, dict[str, Any]]:
    """Stats stored on event metadata (constant for all events of that metadata)."""
    names = {key: meta.name for key, meta in plane.stat_metadata.items()}
    found: dict[int, dict[str, Any]] = {}
    for key, meta in plane.event_metadata.items():
        if not meta.stats:
            continue
        values = {}
        for stat in meta.stats:
            name = names.get(stat.metadata_id)
            if name in wanted:
                values[name] = _stat_value(stat, names)
        if values:
            found[key] = values
    return found


DECODE_CHUNK = 16384  # events decoded at once: bounds the decoder's temporary arrays


def _line_chunks(line: Any, path: str, **options: Any) -> Iterator[EventArrays]:
    """A line's events, ``DECODE_CHUNK`` at a time (``decode_events`` options).  Readers use
    each chunk and drop it before the next is decoded: a line's decode then never holds more
    than one chunk's arrays and bytes (whole lines joined peaked at ~7x the line's size)."""
    events = line_events(line, path)
    try:
        for first in range(0, len(events), DECODE_CHUNK):
            yield decode_events(events[first : first + DECODE_CHUNK], **options)
    except WireError as error:
        raise TraceError(path, f"damaged events on line {line.name!r}: {error}") from None


class _OpColumns:
    """Accumulates per-line column arrays, concatenated once at the end.  A string column's
    parts are object arrays or ``Coded``; ``finish`` gives it as an object array, or as one
    ``Coded`` (``coded=True``)."""

    NAMES = (
        "device",
        "module",
        "program_id",
        "op_name",
        "start_ps",
        "duration_ps",
        "trace_flops",
        "trace_bytes_accessed",
        "trace_model_flops",
        "source",
        "run_id",
        "kernel_count",
    )

    def __init__(
        self, keep: Collection[str] | None = None, bound: EventBound | None = None
    ) -> None:
        # ``keep``: only these columns are accumulated (a caller that reads a few columns of a
        # large host never holds the others); all of ``NAMES`` when None.  ``bound``: counts
        # the rows added, and refuses a read above its bounds (``profan.trace.bounds``).
        self.names = self.NAMES if keep is None else tuple(n for n in self.NAMES if n in keep)
        self.parts: dict[str, list[np.ndarray | Coded]] = {name: [] for name in self.names}
        self.bound = bound

    def add(self, **columns: np.ndarray | Coded) -> None:
        count = len(columns["start_ps"])
        if self.bound is not None:
            device = columns.get("device")
            if not isinstance(device, np.ndarray):
                device = np.full(count, NA_INT, dtype=np.int64)
            start, duration = columns["start_ps"], columns["duration_ps"]
            assert isinstance(start, np.ndarray) and isinstance(duration, np.ndarray)
            self.bound.add(device, start, duration)
        defaults: dict[str, Any] = {
            "module": None,
            "program_id": PROGRAM_NA,
            "source": None,
            "run_id": NA_INT,
            "trace_flops": np.nan,
            "trace_bytes_accessed": np.nan,
            "trace_model_flops": np.nan,
            "kernel_count": 1,
            "op_name": None,
            "device": NA_INT,
        }
        for name in self.names:
            value = columns.get(name)
            if value is None:
                default = defaults[name]
                if default is None:  # a string column none of these rows has: codes, no text
                    value = Coded(np.full(count, -1, dtype=np.int32), [])
                else:
                    value = np.full(count, default, dtype=np.asarray(default).dtype)
            elif not isinstance(value, np.ndarray | Coded):
                value = np.full(count, value)
            self.parts[name].append(value)

    def finish(self, coded: bool = False) -> dict[str, Any]:
        """The columns, each concatenated once; a column's parts are dropped as soon as it is
        built, so the host's events are never held twice over (the read's peak).  ``coded``:
        the string columns as ``Coded`` (else object arrays)."""
        parts, self.parts = self.parts, {name: [] for name in self.names}
        if not parts["start_ps"]:
            return {}
        columns: dict[str, Any] = {}
        for name in self.names:
            pieces = parts.pop(name)
            if name in STRING_COLUMNS:
                columns[name] = _strings(pieces, coded)
            else:  # a numeric column: its parts are arrays (Coded only in STRING_COLUMNS)
                arrays = cast(list[np.ndarray], pieces)
                columns[name] = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
                del arrays
            del pieces
        return columns


STRING_COLUMNS = frozenset({"module", "op_name", "source"})


def _strings(pieces: list[Any], coded: bool) -> Any:
    """One string column from its parts (object arrays or ``Coded``)."""
    if coded and len(pieces) == 1 and isinstance(pieces[0], Coded):
        return pieces[0]
    if not coded:
        objects = [piece.objects() if isinstance(piece, Coded) else piece for piece in pieces]
        return objects[0] if len(objects) == 1 else np.concatenate(objects)
    coder = _Coder()
    codes = []
    for piece in pieces:
        if isinstance(piece, Coded):  # its codes, renumbered into the column's table
            table = np.append(coder.codes(piece.values), np.int32(-1))
            codes.append(table[piece.codes])
        else:
            codes.append(coder.codes(piece))
    return Coded(codes[0] if len(codes) == 1 else np.concatenate(codes), coder.values)


def _line_times(line: Message, events: EventArrays, base_ns: int) -> np.ndarray:
    return events.offset_ps + (line.timestamp_ns - base_ns) * 1000
