"""The report object: what ``profan report`` shows, built from a Profile and its Score.

Every renderer (terminal, Markdown, HTML, JSON), ``profan check`` and ``profan diff`` read this
one object, so the numbers they print are the same numbers.  ``Report.to_dict()`` is the JSON
report (schema in ``SCHEMA.md``); ``Report.from_dict()`` reads one back (baselines, diffs).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profan import __version__
from profan.errors import ConfigError
from profan.hlo.model import Instruction, Module
from profan.report import hlo_facts, keys, timeline
from profan.report.config import RuleConfig

SCHEMA_VERSION = 1

# Categories whose events count as "compute" that can hide communication.  ``control`` (while,
# conditional, call) is left out because its event encloses the ops it runs.
COMPUTE_CATEGORIES = frozenset(
    {"matmul", "elementwise", "reduction", "data-movement", "custom", "other"}
)
BOUNDS = ("compute", "hbm", "ici", "host")


@dataclass(slots=True)
class OpEntry:
    """One HLO op of one module, aggregated over its executions (one row of ``Score.ops``)."""

    key: str  # stable identity across recompiles (see profan.report.keys)
    module: str
    name: str
    opcode: str
    category: str
    occurrences: int
    measured_s: float
    flops: float
    hbm_bytes: float
    ici_bytes: float
    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    roofline_s: float
    bound_by: str
    efficiency: float | None
    scope: str | None = None
    collective: dict[str, Any] | None = None
    global_shapes: list[str] = field(default_factory=list)
    # matmuls: global dims of lhs/rhs/out and the mesh axes splitting each (hlo_facts.matmul_splits)
    splits: dict[str, Any] | None = None
    shape: str | None = None
    source: str | None = None
    exposed_s: float | None = None  # time not overlapped with compute (collectives, host ops)
    # async dones (measured_s is then the exposed wait): the transfer's start-to-done spans as
    # the trace's async line records them (total over async_span_n executions); efficiency is
    # then roofline per execution x async_span_n / async_span_s
    async_span_s: float | None = None
    async_span_n: int | None = None
    exposed_wait_s: float | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def achieved_flops_per_s(self) -> float:
        return self.flops / self.measured_s if self.measured_s > 0 else 0.0

    @property
    def intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes > 0 else math.inf


@dataclass(slots=True)
class Finding:
    """One suspicious op (or whole-profile observation) found by a rule."""

    rule: str
    message: str
    look_at: str
    op: str | None = None  # OpEntry.key
    module: str | None = None
    name: str | None = None
    source: str | None = None
    time_s: float = 0.0  # time at stake, for ordering


@dataclass(slots=True)
class Report:
    device: dict[str, Any]
    chip: dict[str, Any]
    steps: list[dict[str, Any]]
    summary: dict[str, Any]
    ops: list[OpEntry]
    findings: list[Finding]
    unmatched: list[dict[str, Any]]
    trace: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return _clean(
            {
                "schema_version": self.schema_version,
                "tool": {"name": "profan", "version": __version__},
                "trace": self.trace,
                "device": self.device,
                "chip": self.chip,
                "steps": self.steps,
                "summary": self.summary,
                "ops": [dataclasses.asdict(op) for op in self.ops],
                "findings": [dataclasses.asdict(f) for f in self.findings],
                "unmatched": self.unmatched,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "report") -> Report:
        if not isinstance(data, dict) or "schema_version" not in data:
            raise ConfigError(f"{where}: not a profan JSON report (no schema_version)")
        if data["schema_version"] != SCHEMA_VERSION:
            raise ConfigError(
                f"{where}: schema_version {data['schema_version']} is not supported "
                f"(this profan reads {SCHEMA_VERSION})"
            )
        try:
            op_fields = {f.name for f in dataclasses.fields(OpEntry)}
            ops = [OpEntry(**{k: v for k, v in op.items() if k in op_fields}) for op in data["ops"]]
            finding_fields = {f.name for f in dataclasses.fields(Finding)}
            findings = [
                Finding(**{k: v for k, v in f.items() if k in finding_fields})
                for f in data.get("findings", [])
            ]
            return cls(
                device=dict(data["device"]),
                chip=dict(data["chip"]),
                steps=list(data["steps"]),
                summary=dict(data["summary"]),
                ops=ops,
                findings=findings,
                unmatched=list(data.get("unmatched", [])),
                trace=dict(data.get("trace", {})),
            )
        except (KeyError, TypeError) as error:
            raise ConfigError(f"{where}: malformed profan JSON report ({error})") from None

    def op(self, key: str) -> OpEntry | None:
        for entry in self.ops:
            if entry.key == key:
                return entry
        return None


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value


# --------------------------------------------------------------------------------------------
# building


def _num(value: Any, default: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return default
    return number if math.isfinite(number) else default


def _optional(value: Any) -> float | None:
    number = _num(value, math.nan)
    return number if math.isfinite(number) else None


def _optional_int(value: Any) -> int | None:
    number = _optional(value)
    return None if number is None else int(number)


def chip_dict(chip: Any, score_summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The chip's figures as a flat dict, plus where they came from."""
    out: dict[str, Any] = {}
    if chip is not None:
        if dataclasses.is_dataclass(chip):
            for f in dataclasses.fields(chip):
                value = getattr(chip, f.name)
                if isinstance(value, str | int | float | bool) or value is None:
                    out[f.name] = value
                elif isinstance(value, dict):
                    out[f.name] = {str(k): v for k, v in value.items()}
        elif isinstance(chip, dict):
            out.update(chip)
        else:
            out["name"] = str(chip)
    summary = score_summary or {}
    for key in ("chip_source", "peak_source", "figures_source"):
        if key in summary and "source" not in out:
            out["source"] = summary[key]
    figures = normalised_chip_figures(chip)
    if "hbm_bytes_per_s" in figures:
        figures["hbm_bytes_per_s_device"] = figures.pop("hbm_bytes_per_s")
    out.update({k: v for k, v in figures.items() if k != "source" or "source" not in out})
    out.setdefault("source", "catalogue")
    return out


def _device_figure(chip: Any, method: str, attribute: str) -> float | None:
    try:
        value = getattr(chip, method)
        value = value() if callable(value) else value
        return float(value) if value else None
    except (AttributeError, TypeError, ValueError, KeyError):
        value = getattr(chip, attribute, None)
        return float(value) if isinstance(value, int | float) and value else None


def normalised_chip_figures(chip: Any) -> dict[str, Any]:
    """The per-device figures the report uses, under fixed names."""
    if chip is None:
        return {}
    peak = _device_figure(chip, "device_peak_flops", "peak_flops_per_s")
    try:
        source = chip.device_peak_flops_source("bf16")
    except AttributeError:
        source = None
    figure_sources = getattr(chip, "figure_sources", None) or {}
    return {
        "peak_flops_per_s": peak,
        "hbm_bytes_per_s": _device_figure(chip, "device_hbm_bytes_per_s", "hbm_bytes_per_s"),
        "hbm_capacity_bytes": (getattr(chip, "hbm_bytes", None) or 0)
        / max(int(getattr(chip, "devices_per_chip", 1) or 1), 1)
        or None,
        "mxu_size": getattr(chip, "mxu_size", None) or None,
        "source": "trace" if "trace" in {source, *figure_sources.values()} else "catalogue",
    }


def peak_flops(chip: dict[str, Any]) -> float | None:
    """Per-device bf16 peak FLOP/s the report uses."""
    return chip.get("peak_flops_per_s")


def peak_hbm_bw(chip: dict[str, Any]) -> float | None:
    return chip.get("hbm_bytes_per_s_device") or chip.get("hbm_bytes_per_s")


def hbm_capacity(chip: dict[str, Any]) -> float | None:
    return chip.get("hbm_capacity_bytes")


@dataclass(slots=True)
class _OpContext:
    """An op entry with the objects the rules need (not serialised)."""

    entry: OpEntry
    instruction: Instruction | None
    module: Module | None


@dataclass(slots=True)
class Analysis:
    """Everything a report is built from."""

    profile: Any  # profan.trace.profile.Profile
    score: Any  # profan.roofline.Score
    shardings: dict[str, Any] = field(default_factory=dict)


def _module_keys(profile: Any) -> dict[str, str]:
    """Trace module name -> key into ``profile.modules``."""
    mapping: dict[str, str] = {key: key for key in profile.modules}
    ops = profile.ops
    if len(ops) and "module" in ops and "module_key" in ops:
        pairs = ops[["module", "module_key"]].dropna().drop_duplicates("module")
        for module, key in zip(pairs["module"], pairs["module_key"], strict=True):
            mapping.setdefault(str(module), str(key))
    return mapping


def _event_categories(profile: Any, score_ops: pd.DataFrame) -> pd.Series:
    """Category of each event of ``profile.ops`` (from the score's per-op categories)."""
    ops = profile.ops
    if len(ops) == 0:
        return pd.Series([], dtype=object)
    lookup = score_ops[["module", "name", "category"]].drop_duplicates(["module", "name"])
    left = pd.DataFrame({"module": ops["module"].astype(str), "name": ops["op_name"].astype(str)})
    via_name = left.merge(
        lookup.astype({"module": str, "name": str}), on=["module", "name"], how="left"
    )["category"]
    if via_name.isna().all() and "module_key" in ops:
        left = pd.DataFrame(
            {"module": ops["module_key"].astype(str), "name": ops["op_name"].astype(str)}
        )
        via_name = left.merge(
            lookup.astype({"module": str, "name": str}), on=["module", "name"], how="left"
        )["category"]
    return via_name.fillna("unmatched").to_numpy()


@dataclass(slots=True)
class _TimelineFacts:
    exposed_by_op: dict[tuple[str, str], float]
    exposed_comm_s: float  # per device, whole profile
    collective_s: float  # per device, whole profile
    busy_span_s: float  # per device: first op start to last op end
    idle_in_span_s: float  # per device
    top_gaps: list[dict[str, Any]]


def _timeline_facts(profile: Any, categories: np.ndarray) -> _TimelineFacts:
    ops = profile.ops
    if len(ops) == 0:
        return _TimelineFacts({}, 0.0, 0.0, 0.0, 0.0, [])
    start = ops["start_s"].to_numpy(dtype=float)
    end = start + ops["duration_s"].to_numpy(dtype=float)
    device = ops["device"].fillna(-1).to_numpy(dtype=np.int64)
    is_compute = np.isin(categories, list(COMPUTE_CATEGORIES))
    is_hidden_candidate = np.isin(categories, ["collective", "host"])
    exposed = np.zeros(len(ops))
    idle_total = 0.0
    span_total = 0.0
    comm_total = 0.0
    all_gaps: list[timeline.Gap] = []
    devices = np.unique(device)
    for dev in devices:
        on_device = device == dev
        compute = timeline.union(start[on_device & is_compute], end[on_device & is_compute])
        candidates = np.nonzero(on_device & is_hidden_candidate)[0]
        if len(candidates):
            covered = timeline.overlap(compute, start[candidates], end[candidates])
            exposed[candidates] = np.maximum((end[candidates] - start[candidates]) - covered, 0.0)
        busy = timeline.union(start[on_device], end[on_device])
        if len(busy.starts):
            span = float(busy.ends[-1] - busy.starts[0])
            span_total += span
            idle_total += span - busy.total
            all_gaps.extend(timeline.gaps(busy, int(dev), largest=5))
        comm_total += float(
            (
                end[on_device & (categories == "collective")]
                - start[on_device & (categories == "collective")]
            ).sum()
        )
    n = max(len(devices), 1)
    frame = pd.DataFrame(
        {"module": ops["module"].astype(str), "name": ops["op_name"].astype(str), "x": exposed}
    )
    frame = frame[is_hidden_candidate]
    exposed_by_op = {
        (str(m), str(o)): float(v)
        for (m, o), v in frame.groupby(["module", "name"])["x"].sum().items()
    }
    comm_exposed = float(exposed[categories == "collective"].sum())
    all_gaps.sort(key=lambda g: -g.duration_s)
    top_gaps = [
        {"device": g.device, "start_s": g.start_s, "duration_s": g.duration_s} for g in all_gaps[:5]
    ]
    return _TimelineFacts(
        exposed_by_op, comm_exposed / n, comm_total / n, span_total / n, idle_total / n, top_gaps
    )


def _steps(profile: Any, score: Any) -> list[dict[str, Any]]:
    score_steps = getattr(score, "steps", None)
    rows: dict[int, dict[str, Any]] = {}
    steps = profile.steps
    if steps is not None and len(steps):
        for record in steps.to_dict("records"):
            step = int(record["step"])
            rows[step] = {
                "step": step,
                "start_s": _num(record.get("start_s")),
                "end_s": _num(record.get("end_s")),
                "measured_s": _num(record.get("duration_s")),
            }
    if score_steps is not None and len(score_steps):
        for record in score_steps.to_dict("records"):
            try:
                step = int(record["step"])
            except (TypeError, ValueError):
                continue
            row = rows.setdefault(
                step, {"step": step, "measured_s": _num(record.get("measured_s"))}
            )
            for name, value in record.items():
                if name not in ("step",) and name not in row:
                    row[name] = value
    return [rows[k] for k in sorted(rows)]


def build_report(
    analysis: Analysis, config: RuleConfig | None = None, *, with_rules: bool = True
) -> Report:
    """The report of one profile: per-op table, summary, findings of the rules."""
    from profan.report import rules as rules_module

    config = config or RuleConfig()
    profile, score = analysis.profile, analysis.score
    score_ops: pd.DataFrame = score.ops
    chip = chip_dict(getattr(score, "chip", None), getattr(score, "summary", None))
    module_keys = _module_keys(profile)

    categories = _event_categories(profile, score_ops)
    facts = _timeline_facts(profile, categories)

    # ops, in program order within each module so duplicate keys get stable ordinals
    contexts: list[_OpContext] = []
    records = score_ops.to_dict("records")
    order: list[tuple[int, int]] = []
    instructions: list[tuple[Instruction | None, Module | None]] = []
    for index, record in enumerate(records):
        key = module_keys.get(str(record["module"]), str(record["module"]))
        module = profile.modules.get(key)
        instr = profile.instruction(key, str(record["name"])) if module is not None else None
        instructions.append((instr, module))
        position = _program_position(module, instr)
        order.append((position, index))
    order.sort()
    ordered = [index for _, index in order]
    scopes = [hlo_facts.scope_of(instructions[i][0]) for i in range(len(records))]
    op_paths = [hlo_facts.op_name_of(instructions[i][0]) for i in range(len(records))]
    stable_keys = keys.assign_keys(
        (
            str(records[i]["module"]),
            op_paths[i],
            str(records[i].get("opcode") or "unknown"),
            str(records[i]["name"]),
        )
        for i in ordered
    )
    key_of = dict(zip(ordered, stable_keys, strict=True))
    lookups: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
    for index, record in enumerate(records):
        instr, module = instructions[index]
        collective = hlo_facts.collective_info(instr, module)
        module_key = module_keys.get(str(record["module"]), "")
        if module_key not in lookups:
            lookups[module_key] = hlo_facts.sharding_lookup(analysis.shardings.get(module_key))
        matmul_by_name, collective_by_name = lookups[module_key]
        collective_dict = collective.to_dict() if collective else None
        axes = collective_by_name.get(str(record["name"]))
        if collective_dict is not None and axes is not None:
            collective_dict["axes"] = getattr(axes, "axes", None)
        source = record.get("source")
        if not isinstance(source, str) or not source:
            source = hlo_facts.source_of(instr, module)
        efficiency = record.get("efficiency")
        entry = OpEntry(
            key=key_of[index],
            module=str(record["module"]),
            name=str(record["name"]),
            opcode=str(record.get("opcode") or "unknown"),
            category=str(record.get("category") or "other"),
            occurrences=int(_num(record.get("occurrences"), 0)),
            measured_s=_num(record.get("measured_s")),
            flops=_num(record.get("flops")),
            hbm_bytes=_num(record.get("hbm_bytes")),
            ici_bytes=_num(record.get("ici_bytes")),
            t_compute_s=_num(record.get("t_compute_s")),
            t_hbm_s=_num(record.get("t_hbm_s")),
            t_ici_s=_num(record.get("t_ici_s")),
            roofline_s=_num(record.get("roofline_s")),
            bound_by=str(record.get("bound_by") or "unknown"),
            efficiency=None
            if efficiency is None or not math.isfinite(_num(efficiency, math.nan))
            else float(efficiency),
            scope=scopes[index],
            collective=collective_dict,
            global_shapes=hlo_facts.global_shapes(instr, matmul_by_name.get(str(record["name"]))),
            splits=hlo_facts.matmul_splits(matmul_by_name.get(str(record["name"]))),
            shape=hlo_facts.format_shape(instr.shape) if instr is not None else None,
            source=source,
            exposed_s=facts.exposed_by_op.get((str(record["module"]), str(record["name"]))),
            async_span_s=_optional(record.get("async_span_s")),
            async_span_n=_optional_int(record.get("async_span_n")),
            exposed_wait_s=_optional(record.get("exposed_wait_s")),
        )
        contexts.append(_OpContext(entry, instr, module))
    contexts.sort(key=lambda c: -c.entry.measured_s)

    steps = _steps(profile, score)
    summary = _summary(profile, score, contexts, steps, facts, chip)
    summary["mesh"] = {
        str(key): dict(report.mesh.shape)
        for key, report in analysis.shardings.items()
        if getattr(report, "mesh", None) is not None and report.mesh.shape
    }
    device = _device_dict(profile.device)
    report = Report(
        device=device,
        chip=chip,
        steps=steps,
        summary=summary,
        ops=[c.entry for c in contexts],
        findings=[],
        unmatched=[
            {"reason": u.reason, "count": int(u.count), "examples": list(u.examples)[:5]}
            for u in profile.unmatched
        ],
        trace={"path": str(profile.path), "run": profile.run},
    )
    if with_rules:
        findings = rules_module.run_rules(report, contexts, config)
        report.findings = findings
        by_key = {c.entry.key: c.entry for c in contexts}
        for finding in findings:
            if finding.op and finding.op in by_key and finding.rule not in by_key[finding.op].flags:
                by_key[finding.op].flags.append(finding.rule)
        report.summary["findings"] = len(findings)
    return report


def _program_position(module: Module | None, instr: Instruction | None) -> int:
    if module is None or instr is None:
        return 1 << 30
    position = 0
    for computation in module.computations:
        if computation.name == instr.computation:
            for i, candidate in enumerate(computation.instructions):
                if candidate is instr:
                    return position + i
        position += len(computation.instructions)
    return 1 << 30


def _device_dict(device: Any) -> dict[str, Any]:
    return {
        "kind": device.kind,
        "type": device.type_string,
        "count": int(device.count),
        "hosts": list(device.hosts),
        "peak_flops_per_s": device.peak_flops_per_s,
        "peak_hbm_bytes_per_s": device.peak_hbm_bytes_per_s,
    }


def _summary(
    profile: Any,
    score: Any,
    contexts: list[_OpContext],
    steps: list[dict[str, Any]],
    facts: _TimelineFacts,
    chip: dict[str, Any],
) -> dict[str, Any]:
    step_times = np.array([s["measured_s"] for s in steps if s.get("measured_s")], dtype=float)
    score_summary = dict(getattr(score, "summary", {}) or {})
    total_event_time = float(profile.ops["duration_s"].sum()) if len(profile.ops) else 0.0
    matched_time = sum(c.entry.measured_s for c in contexts)
    by_category: dict[str, float] = {}
    by_bound: dict[str, float] = dict.fromkeys(BOUNDS, 0.0)
    for c in contexts:
        by_category[c.entry.category] = by_category.get(c.entry.category, 0.0) + c.entry.measured_s
        by_bound[c.entry.bound_by] = by_bound.get(c.entry.bound_by, 0.0) + c.entry.measured_s
    devices = max(int(profile.device.count or 1), 1)
    # per-device figures: the score aggregates over devices
    by_category = {k: v / devices for k, v in sorted(by_category.items(), key=lambda kv: -kv[1])}
    by_bound = {k: v / devices for k, v in by_bound.items()}
    by_bound["idle"] = facts.idle_in_span_s
    inter_step_gaps = [
        steps[i + 1]["start_s"] - steps[i]["end_s"]
        for i in range(len(steps) - 1)
        if "start_s" in steps[i + 1] and "end_s" in steps[i]
    ]
    inter_step_gaps = [g for g in inter_step_gaps if g > 0]
    mfu = score_summary.get("mfu")
    if mfu is None:
        mfu = _mfu(contexts, step_times, chip, devices, steps)
    summary: dict[str, Any] = {
        "step_count": len(steps),
        "step_time_median_s": float(np.median(step_times)) if len(step_times) else None,
        "step_time_min_s": float(step_times.min()) if len(step_times) else None,
        "step_time_max_s": float(step_times.max()) if len(step_times) else None,
        "step_time_p10_s": float(np.percentile(step_times, 10)) if len(step_times) else None,
        "step_time_p90_s": float(np.percentile(step_times, 90)) if len(step_times) else None,
        "mfu": _num(mfu, math.nan),
        "total_op_time_s": total_event_time,
        "matched_op_time_s": matched_time,
        "unmatched_op_time_s": total_event_time - matched_time,
        "op_count": len(contexts),
        "device_count": devices,
        "time_by_category_s": by_category,
        "time_by_bound_s": by_bound,
        "collective_time_s": facts.collective_s,
        "exposed_comm_s": facts.exposed_comm_s,
        "exposed_comm_per_step_s": facts.exposed_comm_s / len(steps) if steps else None,
        "exposed_comm_share": facts.exposed_comm_s / facts.busy_span_s
        if facts.busy_span_s > 0
        else 0.0,
        "busy_span_s": facts.busy_span_s,
        "idle_s": facts.idle_in_span_s,
        "idle_gaps": facts.top_gaps,
        "inter_step_gap_total_s": float(sum(inter_step_gaps)),
        "inter_step_gap_max_s": float(max(inter_step_gaps)) if inter_step_gaps else 0.0,
        "ideal_time_s": sum(c.entry.roofline_s for c in contexts) / devices,
    }
    for key, value in score_summary.items():
        if key not in summary and isinstance(value, int | float | str | bool):
            summary[f"score_{key}"] = value
    return summary


def _mfu(
    contexts: list[_OpContext],
    step_times: np.ndarray,
    chip: dict[str, Any],
    devices: int,
    steps: list[dict[str, Any]],
) -> float:
    """Achieved FLOP/s over peak: total FLOPs / (devices × step time × peak)."""
    peak = peak_flops(chip)
    if not peak or not len(step_times):
        return math.nan
    flops = sum(c.entry.flops for c in contexts)
    return flops / (devices * float(step_times.sum()) * peak)


def grouped_findings(findings: list[Finding]) -> list[tuple[str | None, list[Finding]]]:
    """Findings grouped for display: whole-profile findings (no op) first under ``None``, then
    one group per op in the order the op first appears (heaviest first)."""
    profile = [f for f in findings if not f.op]
    by_op: dict[str, list[Finding]] = {}
    for f in findings:
        if f.op:
            by_op.setdefault(f.op, []).append(f)
    groups: list[tuple[str | None, list[Finding]]] = [(None, profile)] if profile else []
    groups.extend(by_op.items())
    return groups
