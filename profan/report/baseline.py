"""Baselines that survive machines: what a program did, kept per device kind and chip.

A baseline file (JSON) holds one entry per machine (``"CPU/cpu"``, ``"TPU/v5e"``, ``"GPU/H100"``),
so one file serves a CPU CI runner and a TPU runner. An entry keeps

* the deterministic quantities, which compare exactly: per op (matched by the report's stable
  key) its executions per step, FLOPs, HBM and interconnect bytes per execution and, for
  collectives, kind, group size, groups and bytes; per step the totals of those; the device
  count and the mesh;
* the step times (count, min, median, max), which compare with a tolerance taken from the noise
  the steps showed: ``max(time_tolerance_min, time_noise_factor x (median - min) / min)`` over
  the baseline's steps and the new ones. Times gate only where they mean something: by default
  on TPUs and GPUs, not on CPUs (``time_gate = "auto"``), so a CPU runner gates on structure and
  an accelerator runner on time too.

Entries are built from ``Report.to_dict()`` (the JSON report of SCHEMA.md), not from the
report's internals. Results are ``CheckResult`` rows, as ``profan check`` prints them; a row
about one op carries the op's source line (GitHub annotations land there).
"""

from __future__ import annotations

import datetime
import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from profan import __version__
from profan.errors import ConfigError
from profan.report.budget import Budget, CheckResult
from profan.report.format import percent, seconds, si
from profan.report.keys import base_name
from profan.report.model import Report

FORMAT = "profan-baseline"
FORMAT_VERSION = 1
UPDATE_HINT = "record it with `pytest --profan-update-baseline`"
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


@dataclass(frozen=True, slots=True)
class OpFacts:
    """One op of the baseline; per execution unless the name says otherwise."""

    key: str
    name: str
    opcode: str
    category: str
    per_step: float  # executions per step, all devices together
    flops: float
    hbm_bytes: float
    ici_bytes: float
    collective: dict[str, Any] | None
    shape: str | None
    source: str | None  # not compared: lines move when code above them changes
    time_per_step_s: float  # per device; not compared exactly


@dataclass(slots=True)
class Entry:
    """What one program did on one kind of machine."""

    machine: str
    device_kind: str
    chip: str
    device_count: int
    mesh: dict[str, dict[str, int]]
    steps: int
    step_min_s: float | None
    step_median_s: float | None
    step_max_s: float | None
    totals: dict[str, float]  # per step, all devices
    ops: dict[str, OpFacts] = field(default_factory=dict)
    recorded: dict[str, Any] = field(default_factory=dict)  # profan version, date

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ops"] = [asdict(op) for op in self.ops.values()]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Entry:
        values = dict(data)
        values["ops"] = {op["key"]: OpFacts(**op) for op in data.get("ops", [])}
        return cls(**values)


def machine_key(report: dict[str, Any]) -> str:
    """``"<device kind>/<chip>"`` of a JSON report, e.g. ``"CPU/cpu"`` or ``"TPU/v5e"``."""
    kind = str((report.get("device") or {}).get("kind") or "unknown")
    chip = str((report.get("chip") or {}).get("name") or "unknown")
    return f"{kind}/{chip}"


def _relative(source: Any) -> str | None:
    """``file:line`` relative to the working directory when under it (the checkout, in CI), so
    that baselines and messages carry no machine's absolute paths."""
    if not isinstance(source, str) or not source:
        return None
    cwd = os.getcwd().rstrip("/") + "/"
    return source[len(cwd) :] if source.startswith(cwd) else source


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else 0.0


def _collective(op: dict[str, Any]) -> dict[str, Any] | None:
    facts = op.get("collective")
    if not isinstance(facts, dict):
        return None
    # axis names are a reading of the mesh, not what ran; the mesh is compared on its own
    return {
        "kind": facts.get("kind"),
        "group_size": facts.get("group_size"),
        "groups": facts.get("groups", facts.get("num_groups")),
        "bytes": facts.get("bytes", facts.get("full_bytes")),
    }


def entry_from_report(report: Report | dict[str, Any]) -> Entry:
    """The baseline entry of a report (or of its JSON form)."""
    data = report.to_dict() if isinstance(report, Report) else report
    summary = data.get("summary") or {}
    steps = int(summary.get("step_count") or 0)
    per = max(steps, 1)
    devices = max(
        int(summary.get("device_count") or (data.get("device") or {}).get("count") or 1), 1
    )
    ops: dict[str, OpFacts] = {}
    totals = dict.fromkeys(
        (
            "flops_per_step",
            "hbm_bytes_per_step",
            "ici_bytes_per_step",
            "collectives_per_step",
            "collective_bytes_per_step",
        ),
        0.0,
    )
    for op in data.get("ops", []):
        runs = _number(op.get("occurrences"))
        each = max(runs, 1.0)
        collective = _collective(op)
        facts = OpFacts(
            key=str(op["key"]),
            name=str(op.get("name")),
            opcode=str(op.get("opcode")),
            category=str(op.get("category")),
            per_step=runs / per,
            flops=_number(op.get("flops")) / each,
            hbm_bytes=_number(op.get("hbm_bytes")) / each,
            ici_bytes=_number(op.get("ici_bytes")) / each,
            collective=collective,
            shape=op.get("shape"),
            source=_relative(op.get("source")),
            time_per_step_s=_number(op.get("measured_s")) / per / devices,
        )
        ops[facts.key] = facts
        totals["flops_per_step"] += _number(op.get("flops")) / per
        totals["hbm_bytes_per_step"] += _number(op.get("hbm_bytes")) / per
        totals["ici_bytes_per_step"] += _number(op.get("ici_bytes")) / per
        if collective is not None:
            totals["collectives_per_step"] += runs / per
            totals["collective_bytes_per_step"] += runs / per * _number(collective["bytes"])
    mesh = {
        base_name(str(module)): {str(axis): int(size) for axis, size in shape.items()}
        for module, shape in (summary.get("mesh") or {}).items()
    }
    key = machine_key(data)
    return Entry(
        machine=key,
        device_kind=key.split("/", 1)[0],
        chip=key.split("/", 1)[1],
        device_count=devices,
        mesh=mesh,
        steps=steps,
        step_min_s=summary.get("step_time_min_s"),
        step_median_s=summary.get("step_time_median_s"),
        step_max_s=summary.get("step_time_max_s"),
        totals=totals,
        ops=ops,
        recorded={"profan": __version__, "date": datetime.date.today().isoformat()},
    )


# --------------------------------------------------------------------------------------------
# files


def is_baseline_file(path: str | Path) -> bool:
    """Whether ``path`` is a baseline file (not a JSON report)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def read_baselines(path: str | Path) -> dict[str, Entry]:
    """Every machine's entry of a baseline file (an empty dict when the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"{path}: cannot read the baseline: {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError(f'{path}: not a profan baseline (no "format": "{FORMAT}")')
    if data.get("version") != FORMAT_VERSION:
        raise ConfigError(
            f"{path}: baseline version {data.get('version')!r} is not supported "
            f"(this profan reads {FORMAT_VERSION}); {UPDATE_HINT}"
        )
    try:
        return {key: Entry.from_dict(entry) for key, entry in data["machines"].items()}
    except (KeyError, TypeError, AttributeError) as error:
        raise ConfigError(f"{path}: malformed baseline ({error}); {UPDATE_HINT}") from None


def write_baseline(
    path: str | Path, report: Report | dict[str, Any], versions: dict[str, str] | None = None
) -> Entry:
    """Record ``report`` as the baseline of its machine; other machines' entries are kept.
    ``versions``: of the software that made the program (e.g. jax, jaxlib), recorded with it."""
    path = Path(path)
    entries = read_baselines(path)
    entry = entry_from_report(report)
    entry.recorded.update(versions or {})
    entries[entry.machine] = entry
    data = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "machines": {key: entries[key].to_dict() for key in sorted(entries)},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n", encoding="utf-8")
    temporary.replace(path)  # never a half-written baseline
    return entry


# --------------------------------------------------------------------------------------------
# comparing


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=_REL, abs_tol=1e-12)


def _exact(value: float) -> str:
    return f"{round(value):,}" if float(value).is_integer() else f"{value:,.6g}"


def _ratio(new: float, old: float) -> str:
    return f"x{new / old:.3g}" if old else "new"


def _where(source: str | None) -> str:
    return _relative(source) or "(no source line)"


def _describe(op: OpFacts) -> str:
    return f"{op.category} {op.name} at {_where(op.source)}"


def _collective_text(facts: dict[str, Any] | None) -> str:
    if not facts:
        return "-"
    size, groups = facts.get("group_size"), facts.get("groups")
    shape = f" in {groups} group(s) of {size}" if size else ""
    return f"{facts.get('kind')}{shape}, {si(_number(facts.get('bytes')), 'B')} each"


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
    same_mesh = new.mesh == old.mesh
    results.append(
        CheckResult(
            "baseline.mesh",
            same_mesh,
            f"mesh {new.mesh or 'none'}"
            + ("" if same_mesh else f" vs {old.mesh or 'none'} in the baseline{note}"),
        )
    )
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


def _op_results(new: Entry, old: Entry, note: str) -> list[CheckResult]:
    rows: list[tuple[float, CheckResult]] = []
    for key, op in new.ops.items():
        before = old.ops.get(key)
        if before is None:
            rows.append((_weight(op), _new_op(key, op)))
        elif changes := _op_changes(op, before):
            text = f"{_describe(op)}: {'; '.join(changes)}{note}"
            rows.append((_weight(op), CheckResult(f"baseline.op:{key}", False, text, op.source)))
    rows.extend(
        (_weight(op), _gone_op(key, op, note)) for key, op in old.ops.items() if key not in new.ops
    )
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


def _spread(minimum: float | None, median: float | None) -> float:
    if not minimum or median is None:
        return 0.0
    return max(median - minimum, 0.0) / minimum


def _time_results(new: Entry, old: Entry, policy: TimePolicy) -> list[CheckResult]:
    if not new.step_min_s or not old.step_min_s:
        return [CheckResult("baseline.step_time", True, "no step times to compare")]
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
            (op.time_per_step_s - old.ops[key].time_per_step_s, op)
            for key, op in new.ops.items()
            if key in old.ops
        ),
        key=lambda item: -item[0],
    )
    for growth, op in grown[:3]:
        if growth <= 0:
            break
        before = old.ops[op.key].time_per_step_s
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
