"""A measured report projected onto another chip (``project_chip``) or onto a recompiled
program's HLO (``project_hlo``), with the carry-over model of ``profan.whatif.carry``."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from profan.whatif.arithmetic import Terms, project_execution, project_step, scaling_share
from profan.whatif.carry import CarryOver, carry_over

if TYPE_CHECKING:
    from profan.report.model import OpEntry, Report
    from profan.roofline import ModuleOpRecord


@dataclass(slots=True)
class OpProjection:
    """One op: measured on the source, projected on the target (all devices, all executions)."""

    key: str
    module: str
    name: str
    category: str
    executions: int
    measured_s: float | None  # None: an op only the recompiled program has
    projected_s: float
    low_s: float
    high_s: float
    source_bound: str
    target_bound: str
    rests_on: str  # the rule or counterpart the projection took

    @property
    def changes_bound(self) -> bool:
        return self.source_bound not in (self.target_bound, "unknown")


@dataclass(slots=True)
class Projection:
    trace: str
    source_chip: str
    target: str  # the chip, or the HLO projected
    target_chip: str
    devices: int
    steps: int
    step_s: float  # measured median step on the source
    busy_s: float  # per device per step, measured
    projected_step_s: float
    step_low_s: float
    step_high_s: float
    projected_busy_s: float
    step_rule: str
    ops: list[OpProjection]
    programs: dict[str, tuple[float, float]]  # module -> (measured, projected) per device/step
    parameters: dict[str, Any] = field(default_factory=dict)  # JSON: numbers, text, tables
    notes: list[str] = field(default_factory=list)


def _terms(entry: OpEntry, executions: int) -> Terms:
    n = max(executions, 1)
    return Terms(
        compute_s=(entry.t_compute_s or 0.0) / n,
        hbm_s=(entry.t_hbm_s or 0.0) / n,
        ici_s=(entry.t_ici_s or 0.0) / n,
        transcendental_s=(entry.t_transcendental_s or 0.0) / n,
    )


def kernels_per_execution(entry: OpEntry) -> float:
    """Kernel launches per execution of the op (its kernels' counts over its executions); 1
    where the trace lists no kernels (TPU, CPU, reports before the field)."""
    if not entry.kernels or entry.occurrences < 1:
        return 1.0
    return max(sum(int(k.get("count") or 0) for k in entry.kernels) / entry.occurrences, 1.0)


def host_paced(report: Report) -> bool:
    """Whether the host issues the device's work op by op, so that its pace sets the step: a
    GPU whose kernels ran outside command buffers (CUDA graphs), and a CPU, where the devices
    are the host's own threads."""
    kind = str(report.device.kind or report.chip.kind or "")
    if kind == "CPU":
        return True
    graphs = any("command buffers" in note for note in report.trace.notes)
    return kind == "GPU" and not graphs


def _per_step(report: Report) -> tuple[int, int, float]:
    devices = max(int(report.summary.device_count or 1), 1)
    steps = max(int(report.summary.step_count or 1), 1)
    return devices, steps, float(report.summary.step_time_median_s or 0.0)


def _finish(
    report: Report,
    target: str,
    target_chip: str,
    ops: list[OpProjection],
    model: CarryOver,
    notes: list[str],
) -> Projection:
    devices, steps, step_s = _per_step(report)
    per = devices * steps
    busy = sum(entry.measured_s for entry in report.ops) / per  # the source's own ops
    projected_busy = sum(op.projected_s for op in ops) / per
    paced = host_paced(report)
    step = project_step(step_s, busy, projected_busy, host_paced=paced)
    programs: dict[str, list[float]] = {}
    for op in ops:
        row = programs.setdefault(op.module, [0.0, 0.0])
        row[0] += (op.measured_s or 0.0) / per
        row[1] += op.projected_s / per
    return Projection(
        trace=str(report.trace.path),
        source_chip=str(report.chip.name),
        target=target,
        target_chip=target_chip,
        devices=devices,
        steps=steps,
        step_s=step_s,
        busy_s=busy,
        projected_step_s=step.step_s,
        step_low_s=step.step_s * (1 - model.step_residual),
        step_high_s=step.step_s * (1 + model.step_residual),
        projected_busy_s=step.busy_s,
        step_rule=step.rule,
        ops=sorted(ops, key=lambda op: -op.projected_s),
        programs={name: (row[0], row[1]) for name, row in programs.items()},
        parameters=_parameters(model, str(report.chip.name), target_chip),
        notes=notes,
    )


def _parameters(model: CarryOver, source: str, target: str) -> dict[str, Any]:
    return {
        "fixed_s": model.fixed_s,
        "knee": model.knee,
        "op_residual": model.op_residual,
        "step_residual": model.step_residual,
        "fitted_on": model.fitted_on,
        "sustained": {
            chip: {
                "compute": model.sustained(chip).compute,
                "hbm": model.sustained(chip).hbm,
                "ici": model.sustained(chip).ici,
                "source": model.sustained(chip).source,
            }
            for chip in dict.fromkeys((source, target))
        },
    }


def _op(
    entry: OpEntry, projected: float, model: CarryOver, bounds: tuple[str, str], rests_on: str
) -> OpProjection:
    spread = math.exp(model.op_residual)
    return OpProjection(
        key=entry.key,
        module=entry.module,
        name=entry.name,
        category=entry.category,
        executions=entry.occurrences,
        measured_s=entry.measured_s,
        projected_s=projected,
        low_s=projected / spread,
        high_s=projected * spread,
        source_bound=bounds[0],
        target_bound=bounds[1],
        rests_on=rests_on,
    )


def project_chip(source: Report, on_target: Report, model: CarryOver | None = None) -> Projection:
    """``source`` (the measured report) projected onto the chip ``on_target`` was scored
    against: the same trace and HLO, each op's terms on the target's catalogue figures."""
    model = model or carry_over()
    src_chip, tgt_chip = str(source.chip.name), str(on_target.chip.name)
    src_fr, tgt_fr = model.sustained(src_chip), model.sustained(tgt_chip)
    target_ops = {entry.key: entry for entry in on_target.ops}
    ops = []
    for entry in source.ops:
        n = max(entry.occurrences, 1)
        scored = target_ops.get(entry.key)
        src_terms = _terms(entry, n)
        if scored is None or src_terms.roofline_s(src_fr) <= 0:
            rule = "cost unknown: measured time carried over"
            bounds = (entry.bound_by, entry.bound_by)
            ops.append(_op(entry, entry.measured_s, model, bounds, rule))
            continue
        tgt_terms = _terms(scored, n)
        kernels = kernels_per_execution(entry)
        per = project_execution(
            entry.measured_s / n,
            src_terms,
            tgt_terms,
            src_fr,
            tgt_fr,
            model.fixed_s,
            kernels,
            model.knee,
        )
        efficiency = src_terms.roofline_s(src_fr) * n / entry.measured_s if entry.measured_s else 0
        share = scaling_share(efficiency, model.knee)
        bounds = (src_terms.bound(src_fr), tgt_terms.bound(tgt_fr))
        rule = f"own efficiency carried over; {share:.0%} of it scales"
        ops.append(_op(entry, per * n, model, bounds, rule))
    notes = [f"{tgt_chip}: sustained figures {tgt_fr.source}"]
    return _finish(source, tgt_chip, tgt_chip, ops, model, notes)


# --------------------------------------------------------------------------------------------
# --hlo: a recompiled program, each op's efficiency from its counterpart in the profile
# --------------------------------------------------------------------------------------------


def _size(flops: float, hbm: float) -> float:
    return math.log2(max(flops, 1.0)) + math.log2(max(hbm, 1.0))


def _counterpart(op: ModuleOpRecord, measured: list[OpEntry]) -> tuple[OpEntry | None, str]:
    """The measured op whose efficiency ``op`` (an op of the recompiled program) takes, and
    the rule that chose it: same name and opcode; else the same opcode and category, nearest
    in size; else the same category, nearest in size."""
    for entry in measured:
        if entry.name == op.name and entry.opcode == op.opcode:
            return entry, "same name and opcode"
    size = _size(op.flops or 0.0, op.hbm_bytes)
    for rule, same in (
        ("same opcode and category, nearest size", ("opcode", "category")),
        ("same category, nearest size", ("category",)),
    ):
        found = [e for e in measured if all(getattr(e, k) == getattr(op, k) for k in same)]
        if found:
            best = min(found, key=lambda e: abs(_size(e.flops or 0.0, e.hbm_bytes or 0.0) - size))
            return best, rule
    return None, "no counterpart: roofline at the profile's median efficiency"


def project_hlo(
    source: Report, recompiled: list[ModuleOpRecord], hlo: str, model: CarryOver | None = None
) -> Projection:
    """``source`` projected onto a recompiled program: ``recompiled`` is its compile-time
    roofline (``profan.roofline.score_module`` on the source's chip; ``occurrences`` per
    execution)."""
    model = model or carry_over()
    chip = str(source.chip.name)
    fractions = model.sustained(chip)
    devices, steps, _ = _per_step(source)
    runs = devices * steps  # the module runs once per device and step (as the profile's does)
    measured = [e for e in source.ops if e.measured_s > 0 and e.occurrences > 0]
    efficiencies = sorted(
        e.roofline_s / e.measured_s for e in measured if e.roofline_s and e.roofline_s > 0
    )
    median_eff = efficiencies[len(efficiencies) // 2] if efficiencies else 1.0
    ops = []
    for op in recompiled:
        count = max(op.occurrences, 1)
        terms = Terms(
            compute_s=op.t_compute_s / count,
            hbm_s=op.t_hbm_s / count,
            ici_s=op.t_ici_s / count,
            transcendental_s=op.t_transcendental_s / count,
        )
        entry, rule = _counterpart(op, measured)
        if entry is not None:
            n = max(entry.occurrences, 1)
            # the whole rest scales with the new roofline (no knee): more work is more time,
            # latency-bound or not; the knee is the chip model's (a faster chip, the same work)
            per = project_execution(
                entry.measured_s / n,
                _terms(entry, n),
                terms,
                fractions,
                fractions,
                model.fixed_s,
                kernels_per_execution(entry),
            )
            rule = f"{rule}: {entry.name}"
            source_bound = entry.bound_by
        else:
            per = terms.roofline_s(fractions) / median_eff
            source_bound = "unknown"
        executions = count * runs
        projected = per * executions
        spread = math.exp(model.op_residual)
        ops.append(
            OpProjection(
                key=f"{op.module}|{op.name}",
                module=op.module,
                name=op.name,
                category=op.category,
                executions=executions,
                measured_s=None,
                projected_s=projected,
                low_s=projected / spread,
                high_s=projected * spread,
                source_bound=source_bound,
                target_bound=terms.bound(fractions),
                rests_on=rule,
            )
        )
    projection = _finish(source, Path(hlo).name, chip, ops, model, [])
    projection.notes.append(
        f"recompiled program {hlo}: each op's efficiency from its counterpart in the profile "
        "(rests_on names the rule); the module is taken to run once per device and step"
    )
    return projection
