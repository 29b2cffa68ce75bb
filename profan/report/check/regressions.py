"""A profile against its baseline: the one engine behind every ``baseline.*`` result.

The baseline comes as a JSON report (``profan check --baseline report.json``) or as its
machine's entry of a per-machine baseline file (``profan.report.check.baseline``; the pytest
plugin's baselines).  Either way both sides are normalised into a ``Side`` (the baseline
entry of the profile, plus what only a report has: its MFU and findings), their ops are paired
once (``keys.pair_ops``), and one ``Policy`` (the tolerances of ``[baseline]`` in
``profan.toml``) says what gates.  What the baseline is decides the policy's rules:

* a report, a run someone accepted, compares with tolerances: the median step time within
  ``step_time_tolerance``, MFU within ``mfu_tolerance``, each op that takes at least
  ``op_min_time_share`` of the time within ``op_time_tolerance``, no new collectives, no new
  findings;
* a baseline file's entry, what the program did when it was recorded on that kind of machine,
  compares its structure exactly (``structure.py``: devices, mesh, ops, per-step totals,
  memory) and the fastest step within a tolerance taken from the steps' noise, gated where
  ``time_gate`` says; when that fails the ops that grew most are named.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from profan.report.check.baseline.entry import (
    UPDATE_HINT,
    Entry,
    OpFacts,
    entry_from_report,
    read_baselines,
)
from profan.report.check.results import CheckResult
from profan.report.check.structure import (
    Pairs,
    describe,
    new_op_result,
    structure_results,
)
from profan.report.format import percent, seconds
from profan.report.keys import check_id, pair_ops
from profan.report.model import Finding, Report
from profan.version import __version__

if TYPE_CHECKING:
    from profan.report.check.budget import Budget

# Device kinds whose step times gate by default (CPU runners share cores; their times are noise).
TIMED_DEVICE_KINDS = frozenset({"TPU", "GPU"})


def step_time_missing(report: Report) -> str | None:
    """Why the report has no median step time a gate can use (None when it has one)."""
    s = report.summary
    median = s.step_time_median_s
    if median is not None and math.isfinite(median) and median > 0:
        return None
    if not s.step_count:
        return "the trace has no step markers, so there are no steps to time"
    if median is None:
        return f"none of its {s.step_count} steps has a duration"
    return (
        f"its {s.step_count} steps have a median of {seconds(median)} (zero-length or reversed "
        "step markers), not a time"
    )


def mfu_missing(report: Report) -> str | None:
    """Why the report has no MFU a gate can use (None when it has one)."""
    s = report.summary
    if report.trace.hlo_missing:
        return "the trace was joined to no HLO (pass --hlo DIR or the run's .xplane.pb)"
    why = step_time_missing(report)
    if why is not None:
        return f"it needs the step time, and {why}"
    if s.mfu is not None and math.isfinite(s.mfu) and s.mfu >= 0:
        return None
    if not s.scorer.get("peak_flops_per_s"):
        return "the chip's peak FLOP/s is not known (give --chip)"
    if not s.scorer.get("flops"):
        return "no FLOPs were counted (no op joined to its HLO: give --hlo)"
    if s.mfu is not None:
        return f"the steps' MFU came out as {s.mfu!r}, not a share of the peak"
    return "no step has a FLOP count and a time"


# --------------------------------------------------------------------------------------------
# the two sides and the policy


@dataclass(frozen=True, slots=True)
class ReportFigures:
    """What a report has and a baseline file's entry does not record."""

    mfu: float | None
    mfu_missing: str | None  # why the MFU cannot be compared (None: it can)
    findings: tuple[Finding, ...]


@dataclass(frozen=True, slots=True)
class Side:
    """One side of a comparison, whatever form it came in: its baseline entry (structure, step
    times, per-op facts and times) and, for a report, its ``ReportFigures``."""

    entry: Entry
    figures: ReportFigures | None = None  # None: a baseline file's entry

    @classmethod
    def of(cls, side: Report | dict[str, Any] | Entry) -> Side:
        """A report (or its JSON form) or a baseline entry, normalised."""
        if isinstance(side, Entry):
            return cls(side)
        report = side if isinstance(side, Report) else Report.from_dict(side)
        figures = ReportFigures(report.summary.mfu, mfu_missing(report), tuple(report.findings))
        return cls(entry_from_report(report), figures)


Gate = Literal["auto", "on", "off"]


@dataclass(frozen=True, slots=True)
class Policy:
    """What gates when a profile is compared with its baseline, and with which tolerances
    (``[baseline]`` of profan.toml; ``for_baseline`` sets them from a budget)."""

    # devices, mesh, each op's executions, FLOPs and bytes, per-step totals and memory, exactly
    exact_structure: bool = False
    # the step time compared (the steps' median, or their min) may grow by max(
    # step_tolerance_min, step_noise_factor x noise): noise, the larger (median - min) / min
    # of the two sides' steps
    step_statistic: Literal["median", "min"] = "median"
    step_tolerance_min: float = 0.10
    step_noise_factor: float = 0.0
    time_gate: Gate = "on"  # whether the step time gates ("auto": on TPU and GPU only)
    # None: ops' times do not gate one by one (the ops that grew most are named when the step
    # time fails)
    op_time_tolerance: float | None = 0.50
    op_min_time_share: float = 0.02  # an op's share of the time below which its time is not judged
    mfu_tolerance: float = 0.10  # relative; where both sides have an MFU (reports)
    new_collectives: bool = True  # fail on collectives the baseline did not have
    no_new_suspicious: bool = True  # fail on findings the baseline did not have (reports)

    @classmethod
    def for_baseline(cls, budget: Budget, baseline: Side) -> Policy:
        """The rules for a baseline of this form (see the module's docstring) with the budget's
        ``[baseline]`` tolerances."""
        report = cls(
            step_tolerance_min=budget.step_time_tolerance,
            op_time_tolerance=budget.op_time_tolerance,
            op_min_time_share=budget.op_min_time_share,
            mfu_tolerance=budget.mfu_tolerance,
            new_collectives=budget.new_collectives,
            no_new_suspicious=budget.no_new_suspicious,
        )
        if baseline.figures is not None:
            return report
        gate = budget.time_gate  # a baseline file's entry: what the program did, recorded
        return replace(
            report,
            exact_structure=True,
            step_statistic="min",
            step_tolerance_min=budget.time_tolerance_min,
            step_noise_factor=budget.time_noise_factor,
            time_gate=gate if isinstance(gate, str) else ("on" if gate else "off"),
            op_time_tolerance=None,
            new_collectives=False,  # (the structure's rows name them, and every other new op)
        )

    def gates_time(self, device_kind: str) -> bool:
        if self.time_gate == "auto":
            return device_kind.upper() in TIMED_DEVICE_KINDS
        return self.time_gate == "on"


# --------------------------------------------------------------------------------------------
# the engine


def against(
    report: Report | dict[str, Any] | Entry,
    baseline: Report | dict[str, Any] | Entry,
    budget: Budget,
    versions: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """``report`` against ``baseline`` (a report, or its machine's entry of a baseline file)
    under the budget's ``[baseline]`` tolerances.  ``versions``: of the software that made the
    program now (as given to ``write_baseline``); differences from the recorded ones are named."""
    old = Side.of(baseline)
    return compare(Side.of(report), old, Policy.for_baseline(budget, old), versions)


def against_file(
    report: Report | dict[str, Any],
    path: str | Path,
    budget: Budget,
    versions: Mapping[str, str] | None = None,
) -> list[CheckResult]:
    """``report`` against the entry of its machine in the baseline file ``path``."""
    new = Side.of(report)
    entries = read_baselines(path)
    key = new.entry.machine
    if key not in entries:
        known = ", ".join(sorted(entries)) or "none"
        return [
            CheckResult(
                "baseline.machine",
                False,
                f"{path} has no baseline for {key} (it has: {known}); {UPDATE_HINT}",
            )
        ]
    old = Side.of(entries[key])
    return compare(new, old, Policy.for_baseline(budget, old), versions)


def compare(
    new: Side, old: Side, policy: Policy, versions: Mapping[str, str] | None = None
) -> list[CheckResult]:
    """Every ``baseline.*`` result of ``new`` against ``old``: the structure (when the policy
    compares it exactly), the step time, MFU, the ops' times, new collectives and findings."""
    pairs = pair_ops(new.entry.ops.values(), old.entry.ops.values())
    results: list[CheckResult] = []
    if policy.exact_structure:
        results += structure_results(new.entry, old.entry, pairs, _versions_note(old, versions))
    results += _step_time_results(new.entry, old.entry, pairs, policy)
    if new.figures is not None and old.figures is not None:
        results += _mfu_results(new.figures, old.figures, policy)
    if policy.op_time_tolerance is not None:
        results += _op_time_results(new.entry, pairs, policy, policy.op_time_tolerance)
    if policy.new_collectives:
        results += _new_collective_results(new.entry, pairs)
    if policy.no_new_suspicious and new.figures is not None and old.figures is not None:
        results += _new_finding_results(new.figures, old.figures)
    return results


def _versions_note(old: Side, versions: Mapping[str, str] | None) -> str:
    """What ends each structural difference when the software changed since the baseline."""
    now = {"profan": __version__, **(versions or {})}
    recorded = old.entry.recorded
    changed = [
        f"{name} {recorded[name]} -> {version}"
        for name, version in now.items()
        if name in recorded and recorded[name] != version
    ]
    if not changed:
        return ""
    return f" (recorded with {', '.join(changed)}: the difference may come from there)"


def _whose(now: str | None, before: str | None) -> str | None:
    """The reason a profile and its baseline cannot be compared on one figure, naming which."""
    if now is not None:
        return f"this profile: {now}"
    return None if before is None else f"the baseline: {before}"


# --------------------------------------------------------------------------------------------
# step time


def _step(entry: Entry, statistic: str) -> float | None:
    return entry.step_min_s if statistic == "min" else entry.step_median_s


def _missing_step_time(entry: Entry, whose: str, statistic: str) -> str | None:
    """Why ``entry`` has no step time to compare (None when it has one)."""
    value = _step(entry, statistic)
    if value is not None and value > 0:
        return None
    if entry.steps == 0:
        return f"{whose} has no steps (no step markers in its trace)"
    return (
        f"{whose} has {entry.steps} steps but no positive step time (zero-length or reversed "
        "step markers)"
    )


def _spread(minimum: float | None, median: float | None) -> float:
    if not minimum or median is None:
        return 0.0
    return max(median - minimum, 0.0) / minimum


def _step_time_results(new: Entry, old: Entry, pairs: Pairs, policy: Policy) -> list[CheckResult]:
    statistic = policy.step_statistic
    ungated = (
        None
        if policy.gates_time(new.device_kind)
        else f"times do not gate on {new.device_kind}: [baseline] time_gate"
    )
    missing = _missing_step_time(new, "this profile", statistic) or _missing_step_time(
        old, "the baseline", statistic
    )
    if missing is not None:
        if ungated is not None:
            text = f"step time not compared: {missing} ({ungated})"
            return [CheckResult("baseline.step_time", True, text)]
        return [
            CheckResult("baseline.step_time", False, f"step time could not be compared: {missing}")
        ]
    now, before = _step(new, statistic), _step(old, statistic)
    assert now is not None and before is not None  # (just checked)
    noise = max(
        _spread(new.step_min_s, new.step_median_s), _spread(old.step_min_s, old.step_median_s)
    )
    tolerance = max(policy.step_tolerance_min, policy.step_noise_factor * noise)
    change = now / before - 1
    other = "median" if statistic == "min" else "min"

    def steps(entry: Entry) -> str:
        shown = seconds(_step(entry, statistic))
        return f"{shown} ({other} {seconds(_step(entry, other))}, {entry.steps} steps)"

    text = (
        f"step time {statistic} {steps(new)} vs {steps(old)} in the baseline: {change:+.1%}, "
        f"tolerance +{percent(tolerance)}"
        + (" from the steps' noise" if policy.step_noise_factor else "")
    )
    if ungated is not None:
        return [CheckResult("baseline.step_time", True, f"{text} ({ungated})")]
    if change <= tolerance:
        return [CheckResult("baseline.step_time", True, text)]
    results = [CheckResult("baseline.step_time", False, text)]
    if policy.op_time_tolerance is None:  # the ops do not gate one by one: name the heaviest
        grown = sorted(
            (
                (op.time_per_step_s - partner.time_per_step_s, op, partner)
                for op, partner in pairs
                if op is not None and partner is not None
            ),
            key=lambda item: -item[0],
        )
        for growth, op, partner in grown[:3]:
            if growth <= 0:
                break
            results.append(_op_time_result(f"baseline.op_time:{op.key}", op, partner))
    return results


# --------------------------------------------------------------------------------------------
# MFU, ops, collectives, findings


def _mfu_results(new: ReportFigures, old: ReportFigures, policy: Policy) -> list[CheckResult]:
    missing = _whose(new.mfu_missing, old.mfu_missing)
    if missing is not None:
        return [CheckResult("baseline.mfu", False, f"MFU could not be compared: {missing}")]
    assert new.mfu is not None and old.mfu is not None  # (mfu_missing checked them)
    return [
        CheckResult(
            "baseline.mfu",
            new.mfu >= old.mfu * (1 - policy.mfu_tolerance),
            f"MFU {percent(new.mfu)} vs baseline {percent(old.mfu)} "
            f"(tolerance -{policy.mfu_tolerance:.0%})",
        )
    ]


def _op_time_result(
    name: str, op: OpFacts, before: OpFacts, tolerance: float | None = None
) -> CheckResult:
    """An op that takes longer than its partner in the baseline, per step and device."""
    now, then = op.time_per_step_s, before.time_per_step_s
    text = (
        f"{describe(op)} takes {seconds(now)} per step and device vs {seconds(then)} in the "
        f"baseline (+{seconds(now - then)})"
    )
    if tolerance is not None:
        text += f": {now / then - 1:+.0%}, tolerance +{tolerance:.0%}"
    return CheckResult(name, False, text, op.source)


def _op_time_results(
    new: Entry, pairs: Pairs, policy: Policy, tolerance: float
) -> list[CheckResult]:
    """Each op that takes at least ``op_min_time_share`` of the time, against its partner in
    the baseline: within ``tolerance`` (the policy's ``op_time_tolerance``)."""
    partner = {op.key: before for op, before in pairs if op is not None}
    total = sum(op.time_per_step_s for op in new.ops.values()) or 1.0
    regressed = []
    for op in new.ops.values():  # (in the report's order)
        before = partner[op.key]
        if before is None or op.time_per_step_s < policy.op_min_time_share * total:
            continue
        then = before.time_per_step_s
        if then > 0 and op.time_per_step_s > then * (1 + tolerance):
            name = f"baseline.op:{check_id(op.key, op.name)}"
            regressed.append(_op_time_result(name, op, before, tolerance))
    if regressed:
        return regressed
    return [
        CheckResult(
            "baseline.ops",
            True,
            f"no op above {policy.op_min_time_share:.0%} of the time grew more than "
            f"{tolerance:.0%}",
        )
    ]


def _new_collective_results(new: Entry, pairs: Pairs) -> list[CheckResult]:
    paired = {op.key for op, before in pairs if op is not None and before is not None}
    fresh = [
        op for op in new.ops.values() if op.category == "collective" and op.key not in paired
    ]  # (in the report's order)
    if not fresh:
        return [CheckResult("baseline.new_collectives", True, "no new collectives")]
    # (named as the report's other rows are, keys.check_id: a key runs to hundreds of characters)
    return [new_op_result(op, check_id(op.key, op.name)) for op in fresh]


def _new_finding_results(new: ReportFigures, old: ReportFigures) -> list[CheckResult]:
    known = {(f.rule, f.op) for f in old.findings}
    fresh = [f for f in new.findings if (f.rule, f.op) not in known]
    if not fresh:
        return [
            CheckResult("baseline.new_suspicious", True, "no suspicious ops beyond the baseline")
        ]
    return [
        CheckResult(
            f"baseline.new_suspicious:{f.rule}"
            + (f":{check_id(f.op, f.name or '')}" if f.op else ""),
            False,
            f"new suspicious op: {f.rule}: {f.name or ''} {f.message}".replace("  ", " "),
            f.source,
        )
        for f in fresh
    ]
