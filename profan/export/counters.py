"""Per-device rates over time for the Chrome trace's counter tracks: FLOP/s and HBM bytes/s
achieved, and what the same ops would sustain at their roofline.

Each execution contributes its work spread evenly over its measured interval: achieved at
``work / measured``, roofline at ``work / ideal`` (the rate its roofline time allows).  An
execution measured faster than its roofline (``profan.roofline.checks``: the model charges
work the hardware did not do) is counted at its roofline rate, so no achieved rate is ever above
what the roofline allows.  Async ops (whose measured time is only a wait) and ops whose FLOPs or
bytes or roofline are unknown add nothing.  Rates of overlapping executions on one device add
up, to at most the chip's peak (``device_rates`` says why).

The rates are integrated exactly and averaged over ``bins`` equal intervals of the profile:
``∫ rate`` is piecewise linear between execution boundaries, so it is evaluated at the bin
edges by interpolation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_BINS = 2000
MIN_BIN_S = 1e-6

# (counter name, series name): names that read well in both viewers (Perfetto names a counter
# track "<name> <series>"; chrome://tracing stacks the series of one name, so each name has one).
SERIES = (
    ("achieved", "FLOP/s"),
    ("roofline", "FLOP/s"),
    ("achieved HBM", "B/s"),
    ("roofline HBM", "B/s"),
)


@dataclass(slots=True)
class Work:
    """Per execution of one device: interval (seconds since the profile's first op), FLOPs and
    HBM bytes (NaN where unknown) and ideal time."""

    start_s: np.ndarray
    end_s: np.ndarray
    flops: np.ndarray
    hbm_bytes: np.ndarray
    ideal_s: np.ndarray


def bin_edges(start_s: float, end_s: float, bins: int = DEFAULT_BINS) -> np.ndarray:
    """Equal bins over the profile, none shorter than ``MIN_BIN_S``."""
    span = max(end_s - start_s, MIN_BIN_S)
    count = int(max(1, min(bins, np.ceil(span / MIN_BIN_S))))
    return np.linspace(start_s, start_s + span, count + 1)


def _mean_rate(
    start: np.ndarray, end: np.ndarray, rate: np.ndarray, edges: np.ndarray
) -> np.ndarray:
    """The mean over each bin of the sum of ``rate`` over the intervals [start, end)."""
    keep = np.isfinite(rate) & (rate > 0) & (end > start)
    if not keep.any():
        return np.zeros(len(edges) - 1)
    times = np.concatenate([start[keep], end[keep]])
    steps = np.concatenate([rate[keep], -rate[keep]])
    order = np.argsort(times, kind="stable")
    times, steps = times[order], steps[order]
    level = np.cumsum(steps)  # the summed rate after each boundary
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    at_edges = np.interp(edges, times, integral)
    return np.maximum(np.diff(at_edges) / np.diff(edges), 0.0)


def device_rates(
    work: Work, edges: np.ndarray, peak_flops: float, peak_hbm: float
) -> tuple[dict[tuple[str, str], np.ndarray], int]:
    """Each series of ``SERIES``: its mean rate over each bin of ``edges``, at most the chip's
    peak (``peak_flops``, ``peak_hbm``: per device); and how many bin values were cut to it.

    One execution never exceeds its roofline, but executions that overlap on a device (CPU ops
    on several threads, kernels of a CUDA graph side by side) are each timed as if alone, so
    their sum may; the device shares its peak between them, and the bin shows the peak."""
    measured = work.end_s - work.start_s
    with np.errstate(divide="ignore", invalid="ignore"):
        # faster than its roofline: counted at the roofline rate (see the module docstring)
        achieved_time = np.maximum(measured, work.ideal_s)  # NaN (no roofline): left out
        ideal = np.where(work.ideal_s > 0, work.ideal_s, np.nan)
        rates = {
            SERIES[0]: work.flops / achieved_time,
            SERIES[1]: work.flops / ideal,
            SERIES[2]: work.hbm_bytes / achieved_time,
            SERIES[3]: work.hbm_bytes / ideal,
        }
    out = {}
    capped = 0
    for key, rate in rates.items():
        values = _mean_rate(work.start_s, work.end_s, rate, edges)
        ceiling = peak_flops if key[1] == "FLOP/s" else peak_hbm
        capped += int((values > ceiling).sum())
        out[key] = np.minimum(values, ceiling)
    return out, capped
