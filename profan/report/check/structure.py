"""What a program does, compared exactly: the devices, the mesh, each op's executions, FLOPs,
bytes and collective, the per-step totals and each program's memory (a per-machine baseline
file's gates, ``regressions.Policy.exact_structure``)."""

from __future__ import annotations

import math
import re
from typing import Any

from profan.report.check.baseline.entry import (
    MEMORY_QUANTITIES,
    Entry,
    OpFacts,
    as_number,
    relative_source,
)
from profan.report.check.results import CheckResult
from profan.report.format import si

# Changed ops listed one by one; the rest are counted in one line.
MAX_OP_LINES = 12
_REL = 1e-9  # "exactly", up to float rounding of sums

Pairs = list[tuple[OpFacts | None, OpFacts | None]]  # (profile, baseline): keys.pair_ops


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


def where(source: str | None) -> str:
    return relative_source(source) or "(no source line)"


def describe(op: OpFacts) -> str:
    """``matmul dot.4 at model.py:12``: an op as a result names it."""
    return f"{op.category} {op.name} at {where(op.source)}"


def is_collective(op: OpFacts) -> bool:
    return op.collective is not None or op.category == "collective"


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


def _devices_result(new: Entry, old: Entry, note: str) -> CheckResult:
    same_devices = new.device_count == old.device_count
    return CheckResult(
        "baseline.devices",
        same_devices,
        f"{new.device_count} devices"
        + ("" if same_devices else f" vs {old.device_count} in the baseline{note}"),
    )


_TOTALS = {
    "flops_per_step": "FLOPs per step",
    "hbm_bytes_per_step": "HBM bytes per step",
    "ici_bytes_per_step": "interconnect bytes per step",
    "collectives_per_step": "collective executions per step",
    "collective_bytes_per_step": "collective bytes per step",
}


def _total_results(new: Entry, old: Entry, note: str) -> list[CheckResult]:
    results: list[CheckResult] = []
    for name, label in _TOTALS.items():
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


def new_op_result(op: OpFacts, check: str | None = None) -> CheckResult:
    """An op of the profile that the baseline did not have (a collective, or any other op);
    its result's name is ``baseline.new_collective:`` (or ``new_op:``) and ``check``, by default
    the op's key."""
    shape = f" of {op.shape}" if op.shape else ""
    runs = f"{_exact(op.per_step)} executions per step (all devices)"
    if is_collective(op):
        kind = "new_collective"
        facts = f": {_collective_text(op.collective)}" if op.collective else f" ({op.opcode})"
        text = f"new collective {op.name}{facts}{shape}, {runs}"
    else:
        kind = "new_op"
        text = (
            f"new op {op.name} ({op.category} {op.opcode}{shape}): {si(op.flops)} FLOPs and "
            f"{si(op.hbm_bytes, 'B')} per execution, {runs}"
        )
    at = f", at {where(op.source)}; not in the baseline"
    return CheckResult(f"baseline.{kind}:{check or op.key}", False, text + at, op.source)


def _gone_op(op: OpFacts, note: str) -> CheckResult:
    label = op.name if op.name == op.opcode else f"{op.name} ({op.opcode})"
    return CheckResult(
        f"baseline.gone:{op.key}",
        False,
        f"{op.category} {label} of the baseline is gone (was at {where(op.source)}){note}",
    )


def _op_results(new: Entry, pairs: Pairs, note: str) -> list[CheckResult]:
    rows: list[tuple[float, CheckResult]] = []
    for op, before in pairs:
        if op is None:
            assert before is not None
            rows.append((_weight(before), _gone_op(before, note)))
            continue
        if before is None:
            rows.append((_weight(op), new_op_result(op)))
        elif changes := _op_changes(op, before):
            text = f"{describe(op)}: {'; '.join(changes)}{note}"
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
        at += f" ({where(now.peak_source)})" if now.peak_source else ""
        results.append(
            CheckResult(
                f"baseline.memory:{key}",
                False,
                f"memory of {key} per device: {'; '.join(changes)}{at}{note}",
                now.peak_source,
            )
        )
    return results


def structure_results(new: Entry, old: Entry, pairs: Pairs, note: str) -> list[CheckResult]:
    """Devices, mesh, the ops (paired: ``pairs``), the per-step totals and memory, exactly;
    ``note`` ends each difference (the software versions that changed since the baseline)."""
    return [
        _devices_result(new, old, note),
        _mesh_result(new.mesh, old.mesh, note),
        *_op_results(new, pairs, note),
        *_total_results(new, old, note),
        *_memory_results(new, old, note),
    ]
