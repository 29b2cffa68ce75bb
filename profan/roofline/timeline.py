"""Where each device's time went: its busy span split by op category and by roofline bound, plus
idle time, so that each breakdown sums to the span exactly.

On one device ops may overlap (GPU streams, CPU threads, async transfers beside compute).  Each
instant of the span is shared evenly by the ops running then (two overlapping ops get half of
the overlap each), and an instant with none is idle; summing op durations instead would count
the overlap twice and no longer add up to the span.  Figures are per device, averaged over the
devices that ran ops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profan.roofline.ops import OpRecord

if TYPE_CHECKING:
    from profan.trace.profile import Profile


@dataclass(slots=True)
class TimeBreakdown:
    """A device's busy span split by category and by bound (means over devices with ops)."""

    busy_span_s: float = 0.0  # first op start to last op end
    idle_s: float = 0.0  # no op running
    by_category_s: dict[str, float] = field(default_factory=dict)
    by_bound_s: dict[str, float] = field(default_factory=dict)
    devices: int = 0


def _shares(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, float]:
    """Each interval's share of the covered time (an instant split evenly between the intervals
    covering it), and the idle time between the first start and the last end."""
    order = np.argsort(starts, kind="stable")
    reach = np.maximum.accumulate(ends[order])
    if len(order) < 2 or (starts[order][1:] >= reach[:-1]).all():
        # no two intervals overlap (the usual case): each keeps its own duration
        span = float(reach[-1] - starts[order][0]) if len(order) else 0.0
        return ends - starts, span - float((ends - starts).sum())
    count = len(starts)
    # one sort of all the ends: each start's and end's place among the distinct edges
    edges, place = np.unique(np.concatenate([starts, ends]), return_inverse=True)
    first, last = place[:count], place[count:]
    lengths = np.diff(edges)
    # intervals covering each elementary segment [edges[k], edges[k + 1]): those started at or
    # before edges[k], less those ended by then
    change = np.bincount(first, minlength=len(edges)) - np.bincount(last, minlength=len(edges))
    running = np.cumsum(change)[:-1]
    weight = np.where(running > 0, lengths / np.maximum(running, 1), 0.0)
    cumulative = np.concatenate([[0.0], np.cumsum(weight)])
    idle = float(lengths[running == 0].sum())
    return cumulative[last] - cumulative[first], idle


def time_breakdown(
    profile: Profile,
    ops: Sequence[OpRecord],
    rows: np.ndarray,
    device_of: pd.Series,
) -> TimeBreakdown:
    """The busy span of each device split by category and bound (each op's record gives its
    category and bound; ``rows``: each execution's position in ``ops``), averaged over the
    devices that ran ops (``device_of``: ``spans.device_keys`` of the ops)."""
    events = profile.ops
    if events.empty:
        return TimeBreakdown()
    starts = events["start_s"].to_numpy(dtype=float)
    ends = starts + events["duration_s"].to_numpy(dtype=float)
    devices = device_of.cat.codes.to_numpy()
    # each op's share of its device's time (position -1: executions without an op record)
    per_row = np.zeros(len(ops) + 1)
    result = TimeBreakdown()
    order = np.argsort(devices, kind="stable")
    bounds = np.flatnonzero(np.diff(devices[order])) + 1
    for members in np.split(order, bounds):
        shares, idle = _shares(starts[members], ends[members])
        per_row += np.bincount(rows[members] + 1, weights=shares, minlength=len(per_row))
        result.busy_span_s += float(ends[members].max() - starts[members].min())
        result.idle_s += idle
        result.devices += 1
    for labels, fallback, totals in (
        ([op.category for op in ops], "unmatched", result.by_category_s),
        ([op.bound_by for op in ops], "unknown", result.by_bound_s),
    ):
        for name, value in zip([fallback, *labels], per_row, strict=True):
            if value:
                totals[name] = totals.get(name, 0.0) + float(value)
    count = result.devices
    result.busy_span_s /= count
    result.idle_s /= count
    result.by_category_s = {k: v / count for k, v in sorted(result.by_category_s.items())}
    result.by_bound_s = {k: v / count for k, v in sorted(result.by_bound_s.items())}
    return result
