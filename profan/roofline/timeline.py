"""Where each device's time went: its busy span split by op category and by roofline bound, plus
idle time, so that each breakdown sums to the span exactly.

On one device ops may overlap (GPU streams, CPU threads, async transfers beside compute).  Each
instant of the span is shared evenly by the ops running then (two overlapping ops get half of
the overlap each), and an instant with none is idle; summing op durations instead would count
the overlap twice and no longer add up to the span.  Figures are per device, averaged over the
devices that ran ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profan.roofline.spans import device_keys, key_column

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
    edges = np.unique(np.concatenate([starts, ends]))
    lengths = np.diff(edges)
    # intervals covering each elementary segment [edges[k], edges[k + 1])
    opened = np.searchsorted(np.sort(starts), edges[:-1], side="right")
    closed = np.searchsorted(np.sort(ends), edges[:-1], side="right")
    running = opened - closed
    weight = np.where(running > 0, lengths / np.maximum(running, 1), 0.0)
    cumulative = np.concatenate([[0.0], np.cumsum(weight)])
    first = np.searchsorted(edges, starts)
    last = np.searchsorted(edges, ends)
    idle = float(lengths[running == 0].sum())
    return cumulative[last] - cumulative[first], idle


def time_breakdown(profile: Profile, per_op: pd.DataFrame) -> TimeBreakdown:
    """The busy span of each device split by category and bound (``Score.ops`` gives each op's
    category and bound), averaged over the devices that ran ops."""
    ops = profile.ops
    if ops.empty:
        return TimeBreakdown()
    lookup = pd.DataFrame(
        {
            "_key": key_column(per_op["module_key"]),
            "op_name": per_op["name"],
            "_category": per_op["category"].astype(object),
            "_bound": per_op["bound_by"].astype(object),
        }
    ).drop_duplicates(["_key", "op_name"])
    frame = ops[["module_key", "op_name", "start_s", "duration_s"]].assign(
        _key=key_column(ops["module_key"]), device=device_keys(ops)
    )
    frame = frame.merge(lookup, on=["_key", "op_name"], how="left")
    frame["_category"] = frame["_category"].fillna("unmatched")
    frame["_bound"] = frame["_bound"].fillna("unknown")
    result = TimeBreakdown()
    for _, on_device in frame.groupby("device", sort=False):
        starts = on_device["start_s"].to_numpy(dtype=float)
        ends = starts + on_device["duration_s"].to_numpy(dtype=float)
        shares, idle = _shares(starts, ends)
        result.busy_span_s += float(ends.max() - starts.min())
        result.idle_s += idle
        for column, totals in (("_category", result.by_category_s), ("_bound", result.by_bound_s)):
            for name, value in (
                pd.Series(shares).groupby(on_device[column].to_numpy()).sum().items()
            ):
                totals[str(name)] = totals.get(str(name), 0.0) + float(value)
        result.devices += 1
    devices = result.devices
    result.busy_span_s /= devices
    result.idle_s /= devices
    result.by_category_s = {k: v / devices for k, v in sorted(result.by_category_s.items())}
    result.by_bound_s = {k: v / devices for k, v in sorted(result.by_bound_s.items())}
    return result
