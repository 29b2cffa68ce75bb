"""How many op events one host's read may hold (issue 26, D17): a trace of more than the chip
could run, or than memory can hold, is refused with one line (exit 2) while it is read, not
after minutes and gigabytes.

Two bounds, checked as each chunk of a line's events is decoded (``planes._OpColumns.add``),
so a refused trace costs at most the events read so far:

* **Density**: more than one op per ``MIN_OP_SPACING_PS`` (10 ns) on one device, sustained
  over ``SUSTAINED_EVENTS`` op events, cannot be real: recording one op event takes longer
  (a TraceMe or device-trace record), TPU ops take >= ~100 ns, GPU kernels >= ~1 us.  The real
  traces of fixtures/ and the corpus are >= 50x below it (tests/test_event_bounds.py).
* **Count**: at most ``max_events()`` op events per host, ``$PROFAN_MAX_EVENTS`` (a number,
  ``20M``, or ``none``), default ``DEFAULT_MAX_EVENTS``: a report holds ~0.3 kB per op event
  (measured on tiny-event traces), so the default is ~15 GB, more than a host file of
  hundreds of MB holds (the 69 MB benchmark trace: 502k op events).
"""

from __future__ import annotations

import os

import numpy as np

from profan.errors import TraceError

MAX_EVENTS_ENV = "PROFAN_MAX_EVENTS"
DEFAULT_MAX_EVENTS = 50_000_000
MIN_OP_SPACING_PS = 10_000
SUSTAINED_EVENTS = 65_536
_SUFFIXES = {"k": 10**3, "m": 10**6, "g": 10**9}


def max_events() -> int | None:
    """The most op events one host's read may hold (None: no bound)."""
    text = os.environ.get(MAX_EVENTS_ENV, "").strip().lower().replace("_", "")
    if not text:
        return DEFAULT_MAX_EVENTS
    if text == "none":
        return None
    scale = _SUFFIXES.get(text[-1], 1)
    digits = text[:-1] if scale > 1 else text
    try:
        value = int(float(digits) * scale)
    except (ValueError, OverflowError):
        value = 0
    if value <= 0:
        raise TraceError(
            f"${MAX_EVENTS_ENV}", f"{text!r}: expected a number of events (e.g. 20M) or none"
        )
    return value


class EventBound:
    """Counts the op events of one host's read by device, and refuses (``TraceError`` on
    ``path``) the read that passes either bound."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.limit = max_events()
        self.total = 0
        # per device: events, first start, last end (picoseconds)
        self.devices: dict[int, list[int]] = {}

    def add(self, device: np.ndarray, start_ps: np.ndarray, duration_ps: np.ndarray) -> None:
        count = len(start_ps)
        if not count:
            return
        self.total += count
        if self.limit is not None and self.total > self.limit:
            raise TraceError(
                self.path,
                f"more than {self.limit:,} op events in one host's trace: above profan's bound "
                f"(set {MAX_EVENTS_ENV}=N or none to read it; ~0.3 kB of memory per event)",
            )
        ends = start_ps + np.maximum(duration_ps, 0)
        one = int(device[0])
        if (device == one).all():  # (a TPU or GPU line: one device; the usual case)
            numbers = [one]
            counts = [count]
            first = [int(start_ps.min())]
            last = [int(ends.max())]
        else:
            order = np.argsort(device, kind="stable")
            by_device = device[order]
            at = np.flatnonzero(np.r_[True, by_device[1:] != by_device[:-1]])
            numbers = by_device[at].tolist()
            counts = np.diff(np.r_[at, count]).tolist()
            first = np.minimum.reduceat(start_ps[order], at).tolist()
            last = np.maximum.reduceat(ends[order], at).tolist()
        for number, events, begin, end in zip(numbers, counts, first, last, strict=True):
            seen = self.devices.setdefault(number, [0, begin, end])
            seen[0] += events
            seen[1] = min(seen[1], begin)
            seen[2] = max(seen[2], end)
            if (
                seen[0] >= SUSTAINED_EVENTS
                and (seen[0] - 1) * MIN_OP_SPACING_PS > seen[2] - seen[1]
            ):
                span_us = (seen[2] - seen[1]) / 1e6
                raise TraceError(
                    self.path,
                    f"{seen[0]:,} op events within {span_us:,.3f} us on device {number}: more "
                    f"than one op per {MIN_OP_SPACING_PS // 1000} ns, which no device runs "
                    "(a damaged or made-up trace)",
                )
