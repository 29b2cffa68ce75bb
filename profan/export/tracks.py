"""How slices are laid on a viewer's tracks: trace viewers draw complete events of one thread as
a stack, so on one track they must nest, never partly overlap.

The trace itself does not promise that: kernels of a CUDA graph may run side by side on one
stream's line, and the steps ``Profile.steps`` holds are windows over all devices, which overlap
from one step to the next.  So overlapping slices of one line go to extra lanes, and each
device's steps are the span of its own executions of that step.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """A lane (0, 1, …) for each interval such that the intervals of one lane nest or follow
    each other, never partly overlap: each goes to the lowest lane it nests in, in start order,
    longest first (all 0 when none partly overlaps)."""
    order = np.lexsort((-end, start))
    out = np.zeros(len(start), dtype=np.int64)
    if len(order) < 2 or (start[order][1:] >= end[order][:-1]).all():
        return out  # one after another, the usual case: no stack to keep
    stacks: list[list[int]] = []  # per lane, the ends of the intervals still open
    for index in order.tolist():
        begin, finish = int(start[index]), int(end[index])
        chosen = len(stacks)
        for lane, stack in enumerate(stacks):
            while stack and stack[-1] <= begin:
                stack.pop()
            if not stack or finish <= stack[-1]:
                chosen = lane
                break
        if chosen == len(stacks):
            stacks.append([])
        stacks[chosen].append(finish)
        out[index] = chosen
    return out


def device_steps(ops: pd.DataFrame, rows: np.ndarray) -> list[tuple[int, float, float]]:
    """(step, start, end) in seconds of each step on one device (``rows``: its rows of
    ``Profile.ops``): from its first execution in the step to its last's end, cut at the start
    of its next step so that one device's steps never overlap."""
    frame = pd.DataFrame(
        {
            "step": ops["step"].to_numpy(dtype=np.int64, na_value=-1)[rows],
            "start": ops["start_s"].to_numpy(dtype=float)[rows],
            "end": (ops["start_s"] + ops["duration_s"]).to_numpy(dtype=float)[rows],
        }
    )
    frame = frame[frame["step"] >= 0]
    spans = frame.groupby("step").agg(start=("start", "min"), end=("end", "max"))
    spans = spans.sort_values("start")
    ends = np.minimum(spans["end"].to_numpy(), np.append(spans["start"].to_numpy()[1:], np.inf))
    return [
        (int(step), float(start), float(end))
        for step, start, end in zip(spans.index, spans["start"], ends, strict=True)
    ]
