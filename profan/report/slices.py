"""The op slices of every step on every device, as the HTML page's timeline draws them.

A step holds thousands of op executions per device (500k events over 250 steps on the
benchmark trace), so each column of a step is kept as it travels in the JSON report and the
page: little-endian values, zlib-compressed, base64 (SCHEMA.md "timeline").  The page decodes
the step it shows and nothing else; ``StepSlices.columns()`` decodes in Python.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # numpy is imported where columns are coded: a report re-opened from the
    # cache without a timeline never needs it (~40 ms)
    import numpy as np

# Each column's element type (numpy's little-endian codes, which the page reads as typed arrays).
COLUMN_TYPES = {"lane": "<u2", "op": "<i4", "start_ns": "<f8", "duration_ns": "<f8"}


def encode_column(values: np.ndarray, name: str) -> str:
    import numpy as np

    """One column as stored: little-endian values, zlib (level 1: the HTML render waits on it
    and level 6 saves only ~8% on timelines), base64."""
    raw = np.ascontiguousarray(values, dtype=COLUMN_TYPES[name]).tobytes()
    return base64.b64encode(zlib.compress(raw, 1)).decode("ascii")


def decode_column(text: str, name: str) -> np.ndarray:
    import numpy as np

    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=COLUMN_TYPES[name])


@dataclass(slots=True)
class StepSlices:
    """The op executions of one step, ordered by lane, then start.

    Columns (encoded, see ``COLUMN_TYPES``): ``lane`` (index into ``Timeline.lanes``), ``op``
    (index into ``Report.ops``; ``-(k + 1)`` for ``Timeline.names[k]``, an event with no op
    entry), ``start_ns`` (whole nanoseconds since ``start_s``, stored as differences: slice i
    starts at the sum of values 0..i, which compresses 3x better than the starts themselves),
    ``duration_ns`` (whole nanoseconds)."""

    #: the step's number (-1: one entry holding the whole profile, when the trace marks no
    #: step at all)
    step: int
    #: the step's start as in `steps[]` (step -1: its first op's start)
    start_s: float
    #: the slices: executions and spans
    count: int
    #: lane of each slice: uint16, an index into `lanes`
    lane: str
    #: op of each slice: int32, an index into `ops`, or `-(k+1)` for `names[k]`
    op: str
    #: start of each slice: float64, whole nanoseconds since `start_s`, stored as differences
    #: (slice i starts at the sum of values 0..i)
    start_ns: str
    #: duration of each slice: float64, whole nanoseconds
    duration_ns: str
    #: how many of the slices are async spans (0 or absent without)
    in_flight: int = 0

    def columns(self) -> dict[str, np.ndarray]:
        """The decoded columns, ``start_ns`` as absolute offsets from the step's start."""
        import numpy as np

        out = {name: decode_column(getattr(self, name), name) for name in COLUMN_TYPES}
        out["start_ns"] = np.cumsum(out["start_ns"])
        return out


@dataclass(slots=True)
class Timeline:
    """One lane per (host, device) that ran ops, and every step's slices (JSON ``timeline``:
    what the HTML page's timeline draws)."""

    #: one per (host, device) that ran ops, ordered by host name then device:
    #: `{"host": str, "device": int|null}`; where the trace records async ops' start-to-done
    #: spans (a TPU trace's "Async XLA Ops" line), each such device has a second lane right after
    #: its own, `{"host", "device", "in_flight": true}`, holding those spans (their `op` is the
    #: done op's)
    lanes: list[dict[str, Any]]
    #: op names of events with no entry in `ops` (not joined to HLO)
    names: list[str]
    #: in step order, each step's slices sorted by lane then start; each column holds `count`
    #: values written as base64 of the zlib-compressed little-endian array
    steps: list[StepSlices] = field(default_factory=list)
    #: op events outside every step (not in any `steps[]` entry)
    outside_steps: int = 0
    #: e.g. that only the median host's events were kept (pods read in the reduced form)
    notes: list[str] = field(default_factory=list)
