"""TPU op times on the device's own clock, and the events the trace dates only on the host's.

A TPU device plane's op events (``XLA Ops``) carry two times: the event's own offset and
duration, on the timeline the profiler synchronised with the host, and the stats
``device_offset_ps`` / ``device_duration_ps``, the device's own clock.  The synchronised
timeline cuts ops short, some to zero length (on the v6e trace of the corpus, 23 of the 400
``broadcast_add_fusion`` events last 0 ps there and about 8 ms on the device), and shifts
them by an offset that jumps within one program run.  XProf measures ops by the device's
clock wherever an event has both stats (tsl's ``GetDeviceEventTimespan``: the event's
timespan otherwise), so profan does too.  The device offset is read, like the event's own
offset, from the line's timestamp (XProf reads it as picoseconds from the same zero; the TPU
planes seen so far have line timestamps of 0, where the two agree).

Events that carry no device times (``XLA Modules`` runs, ``Async XLA Ops`` spans, a
``Steps`` line without them) would then sit on another clock than their ops.  They are moved
onto the device's clock by the offset between the two clocks at the op events they begin and
end with (``ClockAnchors``): a run begins where its first op begins and ends where its last
op ends, on either clock, so ops stay inside their runs and steps.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from profan.arrays import among
from profan.trace.wire import KIND_INT, KIND_UINT, EventArrays

DEVICE_OFFSET_STAT = "device_offset_ps"
DEVICE_DURATION_STAT = "device_duration_ps"
DEVICE_CLOCK_STATS = (DEVICE_OFFSET_STAT, DEVICE_DURATION_STAT)


@dataclass(slots=True)
class EventTimes:
    """Offsets (from the line's timestamp) and durations of decoded events, and which of them
    were read from the device's clock."""

    offset_ps: np.ndarray  # int64
    duration_ps: np.ndarray  # int64
    on_device: np.ndarray  # bool: from device_offset_ps / device_duration_ps


def event_times(
    events: EventArrays, offset_stat: int | None, duration_stat: int | None
) -> EventTimes:
    """Each event's times: its device stats where it holds both (integer stats with these
    metadata ids), else its own offset and duration."""
    count = len(events)
    if offset_stat is None or duration_stat is None or not len(events.stat_event):
        return EventTimes(events.offset_ps, events.duration_ps, np.zeros(count, dtype=bool))
    integer = among(events.stat_kind, (KIND_INT, KIND_UINT))
    values = []
    for stat in (offset_stat, duration_stat):
        rows = np.flatnonzero(integer & (events.stat_metadata_id == stat))
        value = np.zeros(count, dtype=np.int64)
        held = np.zeros(count, dtype=bool)
        value[events.stat_event[rows]] = events.stat_int[rows]
        held[events.stat_event[rows]] = True
        values.append((value, held))
    (offset, has_offset), (duration, has_duration) = values
    # a uint64 stat beyond int64 (never a real time) is not a device time
    on_device = has_offset & has_duration & (offset >= 0) & (duration >= 0)
    if not on_device.any():
        return EventTimes(events.offset_ps, events.duration_ps, on_device)
    return EventTimes(
        np.where(on_device, offset, events.offset_ps),
        np.where(on_device, duration, events.duration_ps),
        on_device,
    )


@dataclass(slots=True)
class ClockAnchors:
    """One device plane's op events on both clocks, in picoseconds on one time axis: the
    points that move a host-timeline time onto the device's clock."""

    host_start: np.ndarray  # sorted (ties: earliest device start first)
    start_shift: np.ndarray  # host start - device start of the op at each
    host_end: np.ndarray  # sorted (ties: latest device end last)
    end_shift: np.ndarray  # host end - device end of the op at each
    start_name: np.ndarray  # int64: the op's name, as a code (``name_codes``), at each start
    end_name: np.ndarray  # int64: the same at each end

    @classmethod
    def of(
        cls,
        host_start: np.ndarray,
        host_duration: np.ndarray,
        device_start: np.ndarray,
        device_duration: np.ndarray,
        name: np.ndarray,
    ) -> ClockAnchors:
        host_end = host_start + host_duration
        device_end = device_start + device_duration
        by_start = np.lexsort((device_start, host_start))
        by_end = np.lexsort((device_end, host_end))
        return cls(
            host_start[by_start],
            (host_start - device_start)[by_start],
            host_end[by_end],
            (host_end - device_end)[by_end],
            name[by_start],
            name[by_end],
        )

    def __len__(self) -> int:
        return len(self.host_start)

    def starts(self, host_times: np.ndarray) -> np.ndarray:
        """Beginnings on the host timeline, on the device's clock: by the shift of the first
        op that begins at or after each (the last op's, past the end)."""
        if not len(self):
            return host_times
        at = np.searchsorted(self.host_start, host_times, side="left")
        return host_times - self.start_shift[np.minimum(at, len(self) - 1)]

    def ends(self, host_times: np.ndarray) -> np.ndarray:
        """Ends on the host timeline, on the device's clock: by the shift of the last op that
        ends at or before each (the first op's, before the start)."""
        if not len(self):
            return host_times
        at = np.searchsorted(self.host_end, host_times, side="right") - 1
        return host_times - self.end_shift[np.maximum(at, 0)]

    def named(
        self, host_times: np.ndarray, names: np.ndarray, at_start: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """(found, shift) for events that name the op they begin (``at_start``) or end with,
        where an op of that name begins (ends) at that very host instant: the host timeline
        puts several ops at one instant, a cut op ~8 ms apart from its neighbours on the
        device, so the instant alone does not say which op's clock to take."""
        times, shifts, codes = (
            (self.host_start, self.start_shift, self.start_name)
            if at_start
            else (self.host_end, self.end_shift, self.end_name)
        )
        count, asked = len(times), len(host_times)
        found = np.zeros(asked, dtype=bool)
        shift = np.zeros(asked, dtype=np.int64)
        if not count or not asked:
            return found, shift
        # Anchors and queries in one order by (name, host time), an anchor before a query at
        # the same time; each query takes the anchor just before it (ties among anchors keep
        # their order: the earliest device start last for starts, the latest end for ends).
        rank = np.arange(count) if not at_start else np.arange(count)[::-1]
        order = np.lexsort(
            (
                np.concatenate([rank, np.full(asked, count)]),
                np.concatenate([times, host_times]),
                np.concatenate([codes, names]),
            )
        )
        is_anchor = order < count
        last = np.maximum.accumulate(np.where(is_anchor, np.arange(len(order)), -1))
        queries = np.flatnonzero(~is_anchor)
        query = order[queries] - count
        anchor = order[np.maximum(last[queries], 0)]
        hit = (last[queries] >= 0) & (anchor < count) & (names[query] >= 0)
        anchor = np.where(hit, anchor, 0)
        hit &= (codes[anchor] == names[query]) & (times[anchor] == host_times[query])
        found[query[hit]] = True
        shift[query[hit]] = shifts[anchor[hit]]
        return found, shift

    def spans(
        self,
        host_start: np.ndarray,
        host_duration: np.ndarray,
        names: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Spans dated on the host timeline, as (start, duration) on the device's clock (a
        span whose ends would cross there keeps zero length, never a negative one).
        ``names``: the ops each span begins and ends with, as codes (-1: none)."""
        start = self.starts(host_start)
        host_end = host_start + host_duration
        end = self.ends(host_end)
        if names is not None:
            for times, out, code, at_start in (
                (host_start, start, names[0], True),
                (host_end, end, names[1], False),
            ):
                found, shift = self.named(times, code, at_start)
                out[found] = times[found] - shift[found]
        end = np.maximum(end, start)
        return start, end - start


def async_start_name(done: str) -> str:
    """The start op an async done waits for, by XLA's naming (``copy-done.2`` waits for
    ``copy-start.2``): a span names only its done."""
    return done.replace("-done", "-start", 1)


def name_codes(names: list[str | None], table: dict[str, int]) -> np.ndarray:
    """A code per name, from ``table`` (names not there yet are added; None: -1), plus a last
    entry -1: indexed by a ``Coded`` column's codes, it gives every row's code."""
    codes = [-1 if name is None else table.setdefault(name, len(table)) for name in names]
    return np.array([*codes, -1], dtype=np.int64)
