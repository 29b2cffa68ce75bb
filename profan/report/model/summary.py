"""The device and the whole-profile summary of a report (JSON ``device`` and ``summary``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from profan.report.model.codec import OMIT_NONE, prefixed

Scalar = int | float | str | bool

# The scorer's summary figures are copied into the JSON summary under this prefix.
SCORER_PREFIX = "score_"


@dataclass(frozen=True, slots=True)
class Device:
    """The accelerator as the trace describes it (JSON ``device``)."""

    #: `TPU`, `GPU` or `CPU`
    kind: str = ""
    #: the device's own name, e.g. `TPU v6 Lite`, `NVIDIA H100 80GB HBM3`
    type: str | None = None
    #: devices in the profile, all hosts
    count: int = 0
    #: host names
    hosts: list[str] = field(default_factory=list)
    #: the device's peak FLOP/s as the trace states it (`null` where it does not)
    peak_flops_per_s: float | None = None
    #: the device's HBM bandwidth as the trace states it (`null` where it does not)
    peak_hbm_bytes_per_s: float | None = None


@dataclass(frozen=True, slots=True)
class IdleGap:
    """A hole in one device's timeline between two ops."""

    #: the device
    device: int
    #: seconds since the profile's first event
    start_s: float
    #: seconds
    duration_s: float


@dataclass(slots=True)
class Summary:
    """Whole-profile figures (JSON ``summary``).  Everything is per device (the total over the
    devices that ran ops divided by their count) unless its meaning says otherwise."""

    #: steps in the profile
    step_count: int = 0
    #: median step time, over the steps' `window_s`
    step_time_median_s: float | None = None
    #: shortest step time
    step_time_min_s: float | None = None
    #: longest step time
    step_time_max_s: float | None = None
    #: 10th percentile of the step times
    step_time_p10_s: float | None = None
    #: 90th percentile of the step times
    step_time_p90_s: float | None = None
    #: model FLOPs utilisation (the one definition, `profan.roofline`): for each step, the FLOPs
    #: of every op execution in the step on every device (the trace's `model_flops` stat where
    #: the trace has it, else profan's HLO FLOPs, which count rematerialised work too) divided by
    #: (the chip's dense peak per device for `score_mfu_peak_dtype` (`bf16`) × the step's
    #: measured time × the devices that ran ops in the step); the mean over steps; `null` without
    #: steps or without HLO. `score_mfu_peak_dtype` and `score_mfu_peak_source` (`catalogue` or
    #: `trace`) say which peak
    mfu: float | None = None
    #: sum of every op event's duration, all devices (matched or not)
    total_op_time_s: float = 0.0
    #: `total_op_time_s − unmatched_op_time_s`
    matched_op_time_s: float = 0.0
    #: time of the op events joined to no HLO instruction, all devices (those counted in
    #: `unmatched`; they have `ops[]` rows too, cost unknown)
    unmatched_op_time_s: float = 0.0
    #: ops in the report
    op_count: int = 0
    #: devices that ran ops
    device_count: int = 1
    #: category → time per device (mean over the devices that ran ops), overlapping ops sharing
    #: each instant: with `idle_s` it sums to `busy_span_s` (the scorer's `profan.roofline`
    #: timeline)
    time_by_category_s: dict[str, float] = field(default_factory=dict)
    #: the same split by the op's `bound_by` (`compute`, `hbm`, `ici`, `host`, `transcendental`,
    #: …) and `idle`: sums to `busy_span_s`
    time_by_bound_s: dict[str, float] = field(default_factory=dict)
    #: collective op time per device
    collective_time_s: float = 0.0
    #: collective time not overlapped with compute on the same device, per device, whole profile
    exposed_comm_s: float = 0.0
    #: `exposed_comm_s` divided by `step_count` (`null` without steps)
    exposed_comm_per_step_s: float | None = None
    #: `exposed_comm_s / busy_span_s`
    exposed_comm_share: float = 0.0
    #: per device (mean over devices that ran ops): first op start to last op end
    busy_span_s: float = 0.0
    #: per device: time inside the busy span with no op running
    idle_s: float = 0.0
    #: the 5 longest idle gaps
    idle_gaps: list[IdleGap] = field(default_factory=list)
    #: time between consecutive steps, summed
    inter_step_gap_total_s: float = 0.0
    #: the longest time between consecutive steps
    inter_step_gap_max_s: float = 0.0
    #: sum of `ops[].roofline_s` per device
    ideal_time_s: float = 0.0
    #: further figures of the scorer's summary, verbatim, each as `score_<name>`
    scorer: dict[str, Scalar] = field(default_factory=dict, metadata=prefixed(SCORER_PREFIX))
    #: module key → `{axis name: size}` of the device mesh `profan.sharding` inferred
    mesh: dict[str, dict[str, int]] = field(default_factory=dict)
    #: number of findings (absent until the rules ran)
    findings: int | None = field(default=None, metadata=OMIT_NONE)

    @property
    def step_ideal_s(self) -> float | None:
        """The scorer's ideal step (mean over steps), per device."""
        return _optional_number(self.scorer.get("step_ideal_s"))

    @property
    def step_measured_s(self) -> float | None:
        return _optional_number(self.scorer.get("step_measured_s"))


def _optional_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None
