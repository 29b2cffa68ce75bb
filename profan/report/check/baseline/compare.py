"""Comparing a report with its machine's baseline entry: structure exactly, step times with a
tolerance from the steps' noise (gated on TPU/GPU by default)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profan.report.check.baseline.entry import (
    MEMORY_QUANTITIES,
    UPDATE_HINT,
    Entry,
    OpFacts,
    as_number,
    entry_from_report,
    machine_key,
    read_baselines,
    relative_source,
)
from profan.report.check.budget import Budget
from profan.report.check.results import CheckResult
from profan.report.format import percent, seconds, si
from profan.report.keys import pair_ops
from profan.report.model import Report
from profan.version import __version__

# Device kinds whose step times gate by default (CPU runners share cores; their times are noise).
TIMED_DEVICE_KINDS = frozenset({"TPU", "GPU"})
# Changed ops listed one by one; the rest are counted in one line.
MAX_OP_LINES = 12
_REL = 1e-9  # "exactly", up to float rounding of sums


@dataclass(frozen=True, slots=True)
class TimePolicy:
    """How step times compare (``[baseline]`` of profan.toml: time_gate, time_noise_factor,
    time_tolerance_min)."""

    gate: str = "auto"  # "auto": on TPU/GPU only; "on"; "off"
    noise_factor: float = 3.0
    tolerance_min: float = 0.02

    @classmethod
    def from_budget(cls, budget: Budget) -> TimePolicy:
        """The policy of a ``Budget``'s ``[baseline]`` table."""
        gate = budget.time_gate
        return cls(
            gate=gate if isinstance(gate, str) else ("on" if gate else "off"),
            noise_factor=float(budget.time_noise_factor),
            tolerance_min=float(budget.time_tolerance_min),
        )

    def gates(self, device_kind: str) -> bool:
        if self.gate == "auto":
            return device_kind.upper() in TIMED_DEVICE_KINDS
        return self.gate == "on"


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=_REL, abs_tol=1e-12)


def _exact(value: float) -> str:
    return f"{round(value):,}" if float(value).is_integer() else f"{value:,.6g}"


def _ratio(new: float, old: float) -> str:
    """The change as a difference and a factor: ``+64, x1.0005``."""
    difference = new - old
    sign = "+" if difference >= 0 else "-"
    amount = f"{sign}{_exact(abs(difference))}"
    return f"{amount}, x{new / old:.4g}" if old else f"{amount}, new"


def _where(source: str | None) -> str:
    return relative_source(source) or "(no source line)"


def _describe(op: OpFacts) -> str:
    return f"{op.category} {op.name} at {_where(op.source)}"


def _collective_text(facts: dict[str, Any] | None) -> str:
    if not facts:
        return "-"
    size, groups = facts.get("group_size"), facts.get("groups")
    shape = f" in {groups} group(s) of {size}" if size else ""
    return f"{facts.get('kind')}{shape}, {si(as_number(facts.get('bytes')), 'B')} each"


_QUANTITIES = (
    ("per_step", "executions per step"),
    ("flops", "FLOPs per execution"),
    ("hbm_bytes", "HBM bytes per execution"),
    ("ici_bytes", "interconnect bytes per execution"),
)


def _op_changes(new: OpFacts, old: OpFacts) -> list[str]:
    changes = [
        f"{label} {_exact(getattr(new, name))} vs {_exact(getattr(old, name))} "
        f"({_ratio(getattr(new, name), getattr(old, name))})"
        for name, label in _QUANTITIES
        if not _same(getattr(new, name), getattr(old, name))
    ]
    if (new.collective or None) != (old.collective or None):
        changes.append(
            f"collective {_collective_text(new.collective)} vs {_collective_text(old.collective)}"
        )
    return changes


def _weight(op: OpFacts) -> float:
    """Ordering of changed ops: collectives first, then by work per step."""
    return (1e30 if op.collective else 0.0) + op.per_step * (op.flops + op.hbm_bytes)


_GENERATED_AXIS = re.compile(r"^axis\d+$")  # profan's names when the program's are unknown


def _sizes(mesh: dict[str, dict[str, int]]) -> dict[str, tuple[int, ...]]:
    return {module: tuple(axes.values()) for module, axes in mesh.items()}


def _named(mesh: dict[str, dict[str, int]]) -> bool:
    return any(not _GENERATED_AXIS.match(axis) for axes in mesh.values() for axis in axes)


def _mesh_result(
    new: dict[str, dict[str, int]], old: dict[str, dict[str, int]], note: str
) -> CheckResult:
    """Meshes compare exactly; when one side knows only generated names (``axis0``: a trace
    analysed without its program, e.g. ``profan check`` on a kept capture), the axis sizes."""
    if new == old:
        return CheckResult("baseline.mesh", True, f"mesh {new or 'none'}")
    if _sizes(new) == _sizes(old) and not (_named(new) and _named(old)):
        return CheckResult(
            "baseline.mesh",
            True,
            f"mesh {new} has the baseline's axis sizes ({old}; one side names the axes as "
            "XLA's groups only, without the program's names)",
        )
    return CheckResult(
        "baseline.mesh", False, f"mesh {new or 'none'} vs {old or 'none'} in the baseline{note}"
    )


def _structure(new: Entry, old: Entry, note: str) -> list[CheckResult]:
    results: list[CheckResult] = []
    same_devices = new.device_count == old.device_count
    results.append(
        CheckResult(
            "baseline.devices",
            same_devices,
            f"{new.device_count} devices"
            + ("" if same_devices else f" vs {old.device_count} in the baseline{note}"),
        )
    )
    results.append(_mesh_result(new.mesh, old.mesh, note))
    labels = {
        "flops_per_step": "FLOPs per step",
        "hbm_bytes_per_step": "HBM bytes per step",
        "ici_bytes_per_step": "interconnect bytes per step",
        "collectives_per_step": "collective executions per step",
        "collective_bytes_per_step": "collective bytes per step",
    }
    for name, label in labels.items():
        now, before = new.totals.get(name, 0.0), old.totals.get(name, 0.0)
        ok = _same(now, before)
        results.append(
            CheckResult(
                f"baseline.{name}",
                ok,
                f"{label} {_exact(now)}"
                + (
                    " (as in the baseline)"
                    if ok
                    else f" vs {_exact(before)} in the baseline ({_ratio(now, before)}){note}"
                ),
            )
        )
    return results


def _new_op(key: str, op: OpFacts) -> CheckResult:
    shape = f" of {op.shape}" if op.shape else ""
    runs = f"{_exact(op.per_step)} executions per step (all devices)"
    if op.collective:
        kind = "new_collective"
        text = f"new collective {op.name}: {_collective_text(op.collective)}{shape}, {runs}"
    else:
        kind = "new_op"
        text = (
            f"new op {op.name} ({op.category} {op.opcode}{shape}): {si(op.flops)} FLOPs and "
            f"{si(op.hbm_bytes, 'B')} per execution, {runs}"
        )
    where = f", at {_where(op.source)}; not in the baseline"
    return CheckResult(f"baseline.{kind}:{key}", False, text + where, op.source)


def _gone_op(key: str, op: OpFacts, note: str) -> CheckResult:
    label = op.name if op.name == op.opcode else f"{op.name} ({op.opcode})"
    return CheckResult(
        f"baseline.gone:{key}",
        False,
        f"{op.category} {label} of the baseline is gone (was at {_where(op.source)}){note}",
    )


def _paired(new: Entry, old: Entry) -> list[tuple[OpFacts | None, OpFacts | None]]:
    """The ops of the profile and of the baseline paired (``keys.pair_ops``)."""
    return pair_ops(new.ops.values(), old.ops.values())


def _op_results(new: Entry, old: Entry, note: str) -> list[CheckResult]:
    rows: list[tuple[float, CheckResult]] = []
    for op, before in _paired(new, old):
        if op is None:
            assert before is not None
            rows.append((_weight(before), _gone_op(before.key, before, note)))
            continue
        if before is None:
            rows.append((_weight(op), _new_op(op.key, op)))
        elif changes := _op_changes(op, before):
            text = f"{_describe(op)}: {'; '.join(changes)}{note}"
            rows.append((_weight(op), CheckResult(f"baseline.op:{op.key}", False, text, op.source)))
    rows.sort(key=lambda row: -row[0])
    results = [result for _, result in rows[:MAX_OP_LINES]]
    if len(rows) > MAX_OP_LINES:
        results.append(
            CheckResult(
                "baseline.ops.more",
                False,
                f"... and {len(rows) - MAX_OP_LINES} more op(s) differ from the baseline",
            )
        )
    if not rows:
        results.append(
            CheckResult(
                "baseline.ops",
                True,
                f"{len(new.ops)} ops, each with the baseline's executions, FLOPs and bytes",
            )
        )
    return results


def _memory_results(new: Entry, old: Entry, note: str) -> list[CheckResult]:
    """Per program: peak, argument, output and temporary bytes per device, exactly."""
    if not new.memory or not old.memory:
        return []  # a report without the memory section (or a baseline recorded without it)
    results = []
    for key in sorted(set(new.memory) | set(old.memory)):
        now, before = new.memory.get(key), old.memory.get(key)
        if now is None or before is None:
            state = "new" if before is None else "gone"
            results.append(
                CheckResult(f"baseline.memory:{key}", False, f"memory of {key}: program {state}")
            )
            continue
        pairs = [(name, getattr(now, name), getattr(before, name)) for name in MEMORY_QUANTITIES]
        changes = [
            f"{name.removesuffix('_bytes')} {_exact(a)} B vs {_exact(b)} B ({_ratio(a, b)})"
            for name, a, b in pairs
            if not _same(a, b)
        ]
        if not changes:
            results.append(
                CheckResult(
                    f"baseline.memory:{key}",
                    True,
                    f"memory of {key}: peak {si(now.peak_bytes, 'B')} per device (as in the "
                    "baseline)",
                )
            )
            continue
        at = f"; peak at {now.peak_instruction}" if now.peak_instruction else ""
        at += f" ({_where(now.peak_source)})" if now.peak_source else ""
        results.append(
            CheckResult(
                f"baseline.memory:{key}",
                False,
                f"memory of {key} per device: {'; '.join(changes)}{at}{note}",
                now.peak_source,
            )
        )
    return results


def _spread(minimum: float | None, median: float | None) -> float:
    if not minimum or median is None:
        return 0.0
    return max(median - minimum, 0.0) / minimum


def _missing_step_time(entry: Entry, whose: str) -> str | None:
    """Why ``entry`` has no step time to compare (None when it has one)."""
    if entry.step_min_s is not None and entry.step_min_s > 0:
        return None
    if entry.steps == 0:
        return f"{whose} has no steps (no step markers in its trace)"
    return (
        f"{whose} has {entry.steps} steps but no positive step time (zero-length or reversed "
        "step markers)"
    )


def _time_results(new: Entry, old: Entry, policy: TimePolicy) -> list[CheckResult]:
    missing = _missing_step_time(new, "this profile") or _missing_step_time(old, "the baseline")
    if missing is not None:
        if not policy.gates(new.device_kind):
            text = f"{missing} (times do not gate on {new.device_kind}: [baseline] time_gate)"
            return [CheckResult("baseline.step_time", True, f"step time not compared: {text}")]
        return [
            CheckResult("baseline.step_time", False, f"step time could not be compared: {missing}")
        ]
    assert new.step_min_s is not None and old.step_min_s is not None  # (just checked)
    noise = max(
        _spread(new.step_min_s, new.step_median_s), _spread(old.step_min_s, old.step_median_s)
    )
    tolerance = max(policy.tolerance_min, policy.noise_factor * noise)
    change = new.step_min_s / old.step_min_s - 1
    text = (
        f"step time min {seconds(new.step_min_s)} (median {seconds(new.step_median_s)}, "
        f"{new.steps} steps) vs {seconds(old.step_min_s)} (median {seconds(old.step_median_s)}, "
        f"{old.steps} steps) in the baseline: {change:+.1%}, tolerance +{percent(tolerance)} "
        f"from the steps' noise"
    )
    if not policy.gates(new.device_kind):
        return [
            CheckResult(
                "baseline.step_time",
                True,
                f"{text} (times do not gate on {new.device_kind}: [baseline] time_gate)",
            )
        ]
    if change <= tolerance:
        return [CheckResult("baseline.step_time", True, text)]
    results = [CheckResult("baseline.step_time", False, text)]
    grown = sorted(
        (
            (op.time_per_step_s - partner.time_per_step_s, op, partner.time_per_step_s)
            for op, partner in _paired(new, old)
            if op is not None and partner is not None
        ),
        key=lambda item: -item[0],
    )
    for growth, op, before in grown[:3]:
        if growth <= 0:
            break
        results.append(
            CheckResult(
                f"baseline.op_time:{op.key}",
                False,
                f"{_describe(op)} takes {seconds(op.time_per_step_s)} per step and device vs "
                f"{seconds(before)} in the baseline (+{seconds(growth)})",
                op.source,
            )
        )
    return results


def compare(
    report: Report | dict[str, Any],
    old: Entry,
    policy: TimePolicy,
    versions: dict[str, str] | None = None,
) -> list[CheckResult]:
    """``report`` against the baseline entry of the same machine. ``versions``: of the software
    that made the program now (as given to ``write_baseline``); differences are named."""
    return compare_entries(entry_from_report(report), old, policy, versions)


def compare_entries(
    new: Entry, old: Entry, policy: TimePolicy, versions: dict[str, str] | None = None
) -> list[CheckResult]:
    """Two entries of the same machine: devices, mesh, ops, per-step totals, step time."""
    now = {"profan": __version__, **(versions or {})}
    changed = [
        f"{name} {old.recorded[name]} -> {version}"
        for name, version in now.items()
        if name in old.recorded and old.recorded[name] != version
    ]
    note = (
        f" (recorded with {', '.join(changed)}: the difference may come from there)"
        if changed
        else ""
    )
    devices, mesh, *totals = _structure(new, old, note)
    return [
        devices,
        mesh,
        *_op_results(new, old, note),
        *totals,
        *_memory_results(new, old, note),
        *_time_results(new, old, policy),
    ]


def check(
    report: Report | dict[str, Any],
    path: str | Path,
    policy: TimePolicy,
    versions: dict[str, str] | None = None,
) -> list[CheckResult]:
    """``report`` against the entry of its machine in the baseline file ``path``."""
    data = report.to_dict() if isinstance(report, Report) else report
    entries = read_baselines(path)
    key = machine_key(data)
    if key not in entries:
        known = ", ".join(sorted(entries)) or "none"
        return [
            CheckResult(
                "baseline.machine",
                False,
                f"{path} has no baseline for {key} (it has: {known}); {UPDATE_HINT}",
            )
        ]
    return compare(data, entries[key], policy, versions)
