"""Bulk decoding of serialized ``XEvent`` messages with numpy.

A profile of a few hundred training steps holds millions of events; building one protobuf object
per event and per stat costs microseconds each in Python.  Instead every event of a line arrives as
raw bytes (``XLineView.events``), the bytes are joined into one buffer, and the protobuf wire
format is decoded for all events at once: each pass of the loop reads one field of every event
that still has fields left.  The result is a set of flat arrays: per event (metadata id, offset,
duration) and per stat (owning event, stat metadata id, value).

Wire facts used (protobuf encoding): a field is ``tag = number << 3 | wire_type`` as a varint,
then a varint (type 0), 8 bytes (type 1), a varint length and that many bytes (type 2) or 4 bytes
(type 5).  ``XEvent``: 1 metadata_id, 2 offset_ps, 3 duration_ps, 4 stats (XStat), 5
num_occurrences.  ``XStat``: 1 metadata_id, 2 double, 3 uint64, 4 int64, 5 string, 6 bytes,
7 ref (uint64), 8 gzip-compressed string.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profan.arrays import among

# Value kinds of a decoded stat.
KIND_NONE = 0
KIND_DOUBLE = 2
KIND_UINT = 3
KIND_INT = 4
KIND_STR = 5
KIND_BYTES = 6
KIND_REF = 7
KIND_GZIP = 8


_PADDING = b"\x00" * 16


class WireError(ValueError):
    """Event bytes that are not a valid serialized XEvent."""


@dataclass(slots=True)
class EventArrays:
    """Events of one or more lines, decoded: one array entry per event."""

    index: np.ndarray  # int64: position of the event in its line
    metadata_id: np.ndarray  # int64
    offset_ps: np.ndarray  # int64, relative to the line's timestamp
    duration_ps: np.ndarray  # int64
    # Stats, one entry per stat: the first stat of every event, then the second, ... (an
    # event's stats keep their order; ``stat_event`` names the owner).
    stat_event: np.ndarray  # int64 index into the event arrays
    stat_metadata_id: np.ndarray  # int64
    stat_kind: np.ndarray  # int8, KIND_*
    stat_int: np.ndarray  # int64: int/uint/ref value (uint64 bit pattern), or string start
    stat_double: np.ndarray  # float64 for doubles
    stat_len: np.ndarray  # int64 string/bytes length (0 otherwise)
    buffer: bytes  # the joined event bytes that string stats point into

    def __len__(self) -> int:
        return len(self.metadata_id)

    def having(self, stat_ids: list[int]) -> EventArrays:
        """Only the events holding at least one of these stats (stats renumbered to match)."""
        keep = np.zeros(len(self.index), dtype=bool)
        keep[self.stat_event[among(self.stat_metadata_id, stat_ids)]] = True
        if keep.all():
            return self
        new_number = np.cumsum(keep) - 1
        stat_keep = keep[self.stat_event]
        return EventArrays(
            self.index[keep],
            self.metadata_id[keep],
            self.offset_ps[keep],
            self.duration_ps[keep],
            new_number[self.stat_event[stat_keep]],
            self.stat_metadata_id[stat_keep],
            self.stat_kind[stat_keep],
            self.stat_int[stat_keep],
            self.stat_double[stat_keep],
            self.stat_len[stat_keep],
            self.buffer,
        )

    def stat_text(self, index: int) -> bytes:
        start = int(self.stat_int[index])
        return self.buffer[start : start + int(self.stat_len[index])]


def _read_varint(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varints starting at each ``pos``: (values as int64 bit patterns, positions after them)."""
    byte = buf[pos]
    value = byte.astype(np.int64)
    new_pos = pos + 1
    more = np.flatnonzero(byte >= 0x80)
    if not more.size:
        return value, new_pos
    # Multi-byte varints (timestamps are 5-7 bytes): one byte of every live varint per pass.
    value[more] &= 0x7F
    wide = value[more].astype(np.uint64)
    at = new_pos[more]
    live = np.arange(more.size)
    shift = 7
    while live.size:
        if shift > 63:
            raise WireError("varint longer than 10 bytes")
        byte = buf[at[live]]
        wide[live] |= (byte & 0x7F).astype(np.uint64) << np.uint64(shift)
        at[live] += 1
        live = live[byte >= 0x80]
        shift += 7
    value[more] = wide.view(np.int64)
    new_pos[more] = at
    return value, new_pos


def encode_varint(value: int) -> bytes:
    """The varint bytes of a non-negative int (for byte-pattern searches)."""
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _events_holding(buf: np.ndarray, ends: np.ndarray, stat_ids: list[int]) -> np.ndarray:
    """Indices of events whose bytes may hold a stat with one of these metadata ids.

    A stat with id N is serialized as ``0x08 varint(N)`` right after its length (serializers write
    field 1 first), so an event without those bytes cannot hold it: a cheap superset that the full
    decode then checks.
    """
    if stat_ids and all(0 <= stat_id < 0x80 for stat_id in stat_ids):
        # one-byte ids (the usual case): any of them after a 0x08, in one pass per id
        second = buf[1:]
        hits = second == stat_ids[0]
        for stat_id in stat_ids[1:]:
            hits |= second == stat_id
        hits &= buf[:-1] == 0x08
    else:
        hits = np.zeros(len(buf), dtype=bool)
        for stat_id in stat_ids:
            pattern = b"\x08" + encode_varint(stat_id)
            match = buf[: len(buf) - len(pattern) + 1] == pattern[0]
            for shift, byte in enumerate(pattern[1:], start=1):
                match &= buf[shift : len(buf) - len(pattern) + 1 + shift] == byte
            hits[: len(match)] |= match
    holding = np.zeros(len(ends) + 1, dtype=bool)
    holding[np.searchsorted(ends, np.flatnonzero(hits), side="right")] = True
    return np.flatnonzero(holding[: len(ends)])


def decode_events(
    chunks: list[bytes],
    wanted_stats: list[int] | None = None,
    require_stats: list[int] | None = None,
    exact: bool = True,
) -> EventArrays:
    """Decode serialized XEvents (one bytes object each) into flat arrays.

    ``wanted_stats``: stat metadata ids whose values are needed (all when ``None``); the other
    stats are dropped after reading their id.  ``require_stats``: keep only events holding at
    least one of these stats (e.g. ``hlo_op``): most host events are not op executions, and
    skipping them early is most of the speed on CPU traces.  ``exact=False`` keeps what a byte
    search finds, a few events holding none of them among (a caller that tells events apart by
    their stats anyway saves a copy of every array).  ``EventArrays.index`` says which chunk
    each kept event came from.
    """
    lengths = np.fromiter(map(len, chunks), dtype=np.int64, count=len(chunks))
    # Padding lets a truncated varint read past the end without an index error (checked
    # below); joined with the events, so that the bytes are copied once.
    joined = b"".join([*chunks, _PADDING])
    buf = np.frombuffer(joined, dtype=np.uint8)
    ends = np.cumsum(lengths)
    index = np.arange(len(chunks), dtype=np.int64)
    if require_stats is not None:
        index = _events_holding(buf[: len(buf) - len(_PADDING)], ends, require_stats)
        ends = ends[index]
        lengths = lengths[index]
    count = len(index)
    pos = ends - lengths

    header: list[np.ndarray] = []
    # Fields 1-3 come first and in order whenever present (serializers write fields by number).
    for tag in (0x08, 0x10, 0x18):
        target = np.zeros(count, dtype=np.int64)
        hit = np.flatnonzero((buf[pos] == tag) & (pos < ends))
        if hit.size:
            target[hit], pos[hit] = _read_varint(buf, pos[hit] + 1)
        header.append(target)
    metadata_id, offset_ps, duration_ps = header

    # The rest of each event: stats (field 4), rarely num_occurrences (field 5).
    owners: list[np.ndarray] = []
    stat_starts: list[np.ndarray] = []
    stat_ends: list[np.ndarray] = []
    live = np.flatnonzero(pos < ends)
    while live.size:
        at = pos[live]
        tag = buf[at]
        is_stat = tag == 0x22
        stat_live = live
        if not is_stat.all():
            # Any other field (out-of-order header fields, num_occurrences, unknown ones).
            other = live[~is_stat]
            pos[other] = _other_field(buf, pos[other], ends[other], other, header)
            stat_live = live[is_stat]
            at = at[is_stat]
        size, after = _read_varint(buf, at + 1)
        owners.append(stat_live)
        stat_starts.append(after)
        stat_ends.append(after + size)
        pos[stat_live] = after + size
        live = live[pos[live] < ends[live]]
    if (pos != ends).any():
        raise WireError("an event's fields run past its end")

    if owners:  # pass by pass: an event's stats in their order, events interleaved
        owner = np.concatenate(owners)
        starts = np.concatenate(stat_starts)
        stops = np.concatenate(stat_ends)
    else:
        owner = starts = stops = np.zeros(0, dtype=np.int64)
    wanted = None
    if wanted_stats is not None:
        wanted = np.asarray(sorted({*wanted_stats, *(require_stats or ())}), dtype=np.int64)
    stat_columns = _decode_stats(buf, owner, starts, stops, wanted)
    arrays = EventArrays(index, metadata_id, offset_ps, duration_ps, *stat_columns, buffer=joined)
    if require_stats is not None and exact:
        arrays = arrays.having(require_stats)
    return arrays


def _other_field(
    buf: np.ndarray,
    pos: np.ndarray,
    ends: np.ndarray,
    events: np.ndarray,
    header: list[np.ndarray],
) -> np.ndarray:
    """Read one non-stat field at each position: header fields 1-3 met out of order are stored,
    anything else is skipped.  Returns the positions after the fields."""
    tag, pos = _read_varint(buf, pos)
    wire = tag & 7
    field = tag >> 3
    out = pos.copy()
    varint = np.flatnonzero(wire == 0)
    if varint.size:
        value, out[varint] = _read_varint(buf, pos[varint])
        for number in (1, 2, 3):
            hit = field[varint] == number
            header[number - 1][events[varint[hit]]] = value[hit]
    out[wire == 1] += 8
    out[wire == 5] += 4
    sized = np.flatnonzero(wire == 2)
    if sized.size:
        size, after = _read_varint(buf, pos[sized])
        out[sized] = after + size
    if (field == 0).any():
        raise WireError("field number 0 in an event (not protobuf)")
    if np.isin(wire, (0, 1, 2, 5), invert=True).any() or (out > ends).any():
        raise WireError("malformed field in an event")
    return out


def _decode_stats(
    buf: np.ndarray,
    owner: np.ndarray,
    pos: np.ndarray,
    end: np.ndarray,
    wanted: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Decode XStat messages at [pos, end): owner event, metadata id, kind, values."""
    # Field 1 (metadata_id) first; a stat without one has id 0.
    has_id = (buf[pos] == 0x08) & (pos < end)
    if wanted is not None and len(wanted) and wanted.min() > 0 and wanted.max() < 0x80:
        # Wanted ids of one varint byte (the usual case): a stat is wanted when its second
        # byte is one of them (a longer id's first byte is >= 0x80), told before any decode.
        keep = np.flatnonzero(has_id & among(buf[pos + 1], wanted))
        owner, pos, end = owner[keep], pos[keep], end[keep]
        mid = buf[pos + 1].astype(np.int64)
        value_pos = pos + 2
    else:
        mid = np.zeros(len(pos), dtype=np.int64)
        value_pos = pos.copy()
        hit = np.flatnonzero(has_id)
        mid[hit], value_pos[hit] = _read_varint(buf, pos[hit] + 1)
        if wanted is not None:
            keep = np.flatnonzero(among(mid, wanted))
            owner, mid, value_pos, end = owner[keep], mid[keep], value_pos[keep], end[keep]
    count = len(owner)
    kind = np.zeros(count, dtype=np.int8)
    int_value = np.zeros(count, dtype=np.int64)
    double_value = np.zeros(count, dtype=np.float64)
    length = np.zeros(count, dtype=np.int64)
    present = np.flatnonzero(value_pos < end)
    tag = buf[value_pos[present]]
    if (tag >= 0x80).any() or (tag < 0x08).any():  # (field numbers 0 and 16 or more)
        raise WireError("unexpected field in a stat")
    field = (tag >> 3).astype(np.int8)
    wire = tag & 7
    kind[present] = field
    after = value_pos.copy()
    varint = present[wire == 0]
    if varint.size:
        int_value[varint], after[varint] = _read_varint(buf, value_pos[varint] + 1)
    double = present[wire == 1]
    if double.size:
        raw = buf[(value_pos[double] + 1)[:, None] + np.arange(8)]
        double_value[double] = np.ascontiguousarray(raw).view("<f8").ravel()
        after[double] = value_pos[double] + 9
    sized = present[wire == 2]
    if sized.size:
        size, start = _read_varint(buf, value_pos[sized] + 1)
        int_value[sized] = start
        length[sized] = size
        after[sized] = start + size
    if (after != end).any():
        raise WireError("a stat holds more than an id and one value")
    return owner, mid, kind, int_value, double_value, length
