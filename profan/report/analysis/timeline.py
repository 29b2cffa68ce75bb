"""Interval arithmetic on one device's timeline: overlap of collectives with compute, idle gaps.

All functions are pure and vectorised (numpy) because a 50 MB trace holds millions of events.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class Union:
    """Disjoint, sorted intervals ``[starts[i], ends[i])`` and the covered length before each."""

    starts: np.ndarray
    ends: np.ndarray
    covered_before: np.ndarray  # covered length of intervals 0..i-1

    @property
    def total(self) -> float:
        if len(self.starts) == 0:
            return 0.0
        return float(self.covered_before[-1] + (self.ends[-1] - self.starts[-1]))


def union(starts: np.ndarray, ends: np.ndarray) -> Union:
    """Merge possibly overlapping intervals into disjoint ones."""
    starts = np.asarray(starts, dtype=float)
    ends = np.asarray(ends, dtype=float)
    if len(starts) == 0:
        empty = np.zeros(0)
        return Union(empty, empty, empty)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    running_end = np.maximum.accumulate(e)
    # a new block starts where an interval begins after everything before it ended
    new_block = np.ones(len(s), dtype=bool)
    new_block[1:] = s[1:] > running_end[:-1]
    block_id = np.cumsum(new_block) - 1
    block_starts = s[new_block]
    block_ends = np.zeros(len(block_starts))
    np.maximum.at(block_ends, block_id, running_end)
    lengths = block_ends - block_starts
    covered_before = np.concatenate(([0.0], np.cumsum(lengths)[:-1]))
    return Union(block_starts, block_ends, covered_before)


def covered_up_to(u: Union, x: np.ndarray) -> np.ndarray:
    """Length of ``u`` that lies before each point ``x``."""
    x = np.asarray(x, dtype=float)
    if len(u.starts) == 0:
        return np.zeros_like(x)
    i = np.searchsorted(u.starts, x, side="right") - 1
    clipped = np.clip(i, 0, None)
    inside = np.clip(x - u.starts[clipped], 0.0, u.ends[clipped] - u.starts[clipped])
    return np.where(i >= 0, u.covered_before[clipped] + inside, 0.0)


def overlap(u: Union, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each interval, how much of it ``u`` covers."""
    return covered_up_to(u, ends) - covered_up_to(u, starts)


@dataclass(frozen=True, slots=True)
class Gap:
    device: int
    start_s: float
    duration_s: float


def gaps(
    u: Union, device: int, min_duration_s: float = 0.0, largest: int | None = None
) -> list[Gap]:
    """Holes between the busy blocks of ``u`` (within its own span), or only the ``largest``."""
    if len(u.starts) < 2:
        return []
    holes = u.starts[1:] - u.ends[:-1]
    keep = np.nonzero(holes > min_duration_s)[0]
    if largest is not None and len(keep) > largest:
        keep = keep[np.argpartition(-holes[keep], largest - 1)[:largest]]
        keep = keep[np.argsort(-holes[keep], kind="stable")]
    return [Gap(device, float(u.ends[k]), float(holes[k])) for k in keep]
