"""What fixing a finding would save, its floor and the order findings are listed in.

A rule states its saving in the units it knows (seconds over all devices and the captured steps,
or bytes per device); here it becomes a share of what there is (the devices' time, the chip's
memory per device), is compared with the rule's floor, and ranks the finding: time savings first
by share of the time, then memory savings by share of memory, then findings whose saving is
unknown (by the time at stake).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from profan.report.model import Finding, Report
from profan.report.rules.config import RuleConfig

# The RuleConfig fields a floor may name (RuleInfo.floors), and what each compares.
TIME_FLOOR = "min_saving_share"
BYTES_FLOOR = "min_saving_bytes"
MEMORY_SHARE_FLOOR = "min_saving_memory_share"
MEMORY_FLOORS = (BYTES_FLOOR, MEMORY_SHARE_FLOOR)


def device_time_s(report: Report) -> float | None:
    """The devices' time over the captured profile, all devices: a time saving's denominator
    (the busy span per device x devices; the ops' total where the span is unknown)."""
    s = report.summary
    span = s.busy_span_s * max(s.device_count, 1)
    if span > 0:
        return span
    return s.total_op_time_s if s.total_op_time_s > 0 else None


def memory_per_device(report: Report) -> float | None:
    capacity = report.chip.hbm_capacity_bytes
    return float(capacity) if isinstance(capacity, int | float) and capacity > 0 else None


def with_shares(finding: Finding, report: Report) -> Finding:
    """The finding with its saving as a share of the time or of the memory (None unknown)."""
    time_share = None
    total = device_time_s(report)
    if finding.saving_s is not None and total:
        time_share = max(finding.saving_s, 0.0) / total
    memory_share = None
    capacity = memory_per_device(report)
    if finding.saving_bytes is not None and capacity:
        memory_share = max(finding.saving_bytes, 0.0) / capacity
    return dataclasses.replace(finding, saving_share=time_share, saving_memory_share=memory_share)


def above_floor(finding: Finding, floors: Iterable[str], config: RuleConfig) -> bool:
    """Whether the finding's saving reaches each floor its rule names.  A saving that is not
    known is not judged against a floor (the rule's own thresholds stand)."""
    shares = {
        TIME_FLOOR: finding.saving_share,
        BYTES_FLOOR: finding.saving_bytes,
        MEMORY_SHARE_FLOOR: finding.saving_memory_share,
    }
    for floor in floors:
        value = shares.get(floor)
        if value is not None and value < getattr(config, floor):
            return False
    return True


def rank_key(finding: Finding) -> tuple[int, float]:
    """Time savings first (largest share of the time first), then memory savings (largest
    share of memory, else bytes), then the rest by the time at stake."""
    if finding.saving_share is not None:
        return 0, -finding.saving_share
    if finding.saving_s is not None:
        return 0, -finding.saving_s
    if finding.saving_memory_share is not None:
        return 1, -finding.saving_memory_share
    if finding.saving_bytes is not None:
        return 2, -finding.saving_bytes
    return 3, -finding.time_s


def ranked(findings: Iterable[Finding]) -> list[Finding]:
    return sorted(findings, key=rank_key)


def grouped_findings(findings: list[Finding]) -> list[tuple[str | None, list[Finding]]]:
    """Findings grouped for display, ranked by what fixing them would save
    (``ranked``): one group per op, and the whole-profile findings (no op) as one
    group under ``None``, each group where its largest saving ranks."""
    groups: dict[str | None, list[Finding]] = {}
    for f in ranked(findings):
        groups.setdefault(f.op or None, []).append(f)
    return list(groups.items())
