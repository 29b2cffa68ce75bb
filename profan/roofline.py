"""Score ops against the roofline: how long each op should have taken, and how close it came.

Per op (MODEL.md section 1): ``t_compute = FLOPs / peak FLOP/s`` (for the math dtype),
``t_hbm = HBM bytes / HBM bandwidth``, ``t_ici`` = the collective's time (section 4),
``roofline = max(...)``, ``bound_by`` = the largest term, ``efficiency = roofline / measured``.
Copies between host memory and HBM are bound by PCIe (``t_host_s``).

Async pairs: the pair is scored on its ``-done`` op — the done's measured duration is the wait
for the transfer (``exposed_wait_s``), while the ``-start`` only issues it (rows for starts have
no roofline time and ``bound_by == "async-start"``).  Where the trace records the transfer's span
from start to done (``Profile.async_ops``; on TPU the "Async XLA Ops" line, which may cover only
some devices), ``async_span_s`` is the spans' total, ``async_span_n`` how many executions they
cover, and ``efficiency = roofline per execution x async_span_n / async_span_s``: the transfer
against its ideal.  ``measured_s`` stays the wait.  Without spans a done's efficiency is left
undefined (NaN): the wait is only the part of the transfer not hidden behind other work.

Per step (``Score.steps``): ``ideal_s`` is, on the busiest device, the larger of the synchronous
ops' rooflines summed and the busiest link's async traffic (host-to-device, device-to-host and
ICI transfers may overlap compute but not each other on one link); ``mfu`` is the step's model
FLOPs (the trace's ``model_flops`` where it has them, else profan's FLOPs) over the bf16 peak x
step time x devices; ``share_<bound>`` is the share of op time whose op is bound by it.

``score(profile, chip)`` scores a loaded trace; ``score_module(module, chip)`` is the same
arithmetic on a bare HLO module (a compile-time roofline, no measured times).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from profan.chips import Chip, chip_for_device, get_chip
from profan.cost import CostModel, OpCost
from profan.cost.interconnect import collective_time
from profan.hlo.model import Computation, Instruction, Module
from profan.hlo.views import called_computations

if TYPE_CHECKING:
    from profan.trace.profile import Profile

BOUNDS = ("compute", "hbm", "ici", "host")
# Opcodes whose called computations run as ordinary (non-fused) code; an async-start is scored
# as one op (its computation is what it runs asynchronously).
CONTROL_FLOW = ("while", "call", "conditional")
FREE = ("parameter", "constant", "get-tuple-element", "bitcast", "tuple", "after-all",
        "add-dependency", "domain", "partition-id", "replica-id")  # fmt: skip
GPU_DEVICES_PER_NODE = 8  # NVLink/Infinity Fabric domain; groups wider than a node use DCN

OP_COLUMNS = (
    "module", "name", "opcode", "category", "occurrences", "measured_s", "flops", "hbm_bytes",
    "ici_bytes", "t_compute_s", "t_hbm_s", "t_ici_s", "t_host_s", "roofline_s", "bound_by",
    "efficiency", "source", "cost_source", "dtype", "async_role", "link", "module_key",
    "async_span_s", "async_span_n", "exposed_wait_s", "derivation",
)  # fmt: skip
MODULE_COLUMNS = (
    "module", "computation", "name", "opcode", "category", "occurrences", "flops", "hbm_bytes",
    "ici_bytes", "intensity", "t_compute_s", "t_hbm_s", "t_ici_s", "t_host_s", "roofline_s",
    "bound_by", "dtype", "derivation",
)  # fmt: skip


@dataclass(slots=True)
class OpTimes:
    """Roofline times of one op execution."""

    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    t_host_s: float
    bound_by: str
    notes: list[str] = field(default_factory=list)

    @property
    def roofline_s(self) -> float:
        return max(self.t_compute_s, self.t_hbm_s, self.t_ici_s, self.t_host_s)


@dataclass(slots=True)
class Score:
    """A profile scored against a chip's roofline."""

    ops: pd.DataFrame
    steps: pd.DataFrame
    chip: Chip
    summary: dict[str, Any]


# ------------------------------------------------------------------------------- per op


def _crosses_hosts(groups: list[list[int]], chip: Chip) -> bool:
    if chip.kind != "GPU" or not groups:
        return False
    return any(len({d // GPU_DEVICES_PER_NODE for d in group}) > 1 for group in groups)


def _roofline_bytes(cost: OpCost) -> float:
    """HBM bytes the roofline charges: XLA's accounting unless the op moves less (in place)."""
    return cost.roofline_hbm_bytes if cost.roofline_hbm_bytes is not None else cost.hbm_bytes


def op_times(
    cost: OpCost,
    chip: Chip,
    instruction: Instruction | None = None,
    *,
    mesh_axes: tuple[int, ...] | None = None,
    slice_devices: int | None = None,
) -> OpTimes:
    """Roofline terms of one execution of an op with ``cost`` on ``chip`` (per device)."""
    notes: list[str] = []
    flops = cost.flops or 0.0
    t_compute = flops / chip.device_peak_flops(cost.dtype or "bf16") if flops else 0.0
    hbm = _roofline_bytes(cost)
    t_hbm = hbm / chip.device_hbm_bytes_per_s if hbm else 0.0
    t_ici = 0.0
    t_host = 0.0
    if cost.host_transfer:
        t_host, t_hbm = cost.hbm_bytes / chip.pcie_bytes_per_s, 0.0
        notes.append("host <-> device copy: PCIe bandwidth")
    info = cost.collective
    if info is not None and info.group_size > 1:
        axis_sizes = mesh_axes or info.axis_sizes or (info.group_size,)
        timing = collective_time(
            info.kind,
            info.full_bytes,
            info.group_size,
            chip,
            n_axes=len(axis_sizes),
            axis_sizes=tuple(axis_sizes),
            slice_devices=slice_devices,
            crosses_hosts=_crosses_hosts(info.groups, chip),
        )
        t_ici = timing.t_s
        notes.append(timing.describe())
    terms = {"compute": t_compute, "hbm": t_hbm, "ici": t_ici, "host": t_host}
    bound_by = max(terms, key=lambda key: terms[key]) if any(terms.values()) else "none"
    return OpTimes(t_compute, t_hbm, t_ici, t_host, bound_by, notes)


def _category(instruction: Instruction, module: Module | None) -> str:
    try:
        from profan.attribute import classify

        return classify(instruction, module).category
    except Exception:  # the classifier is optional here; fall back to a coarse guess
        opcode = instruction.opcode
        if opcode in ("dot", "convolution"):
            return "matmul"
        if any(opcode.startswith(k) for k in ("all-", "reduce-scatter", "collective-")):
            return "collective"
        if opcode in ("reduce", "reduce-window"):
            return "reduction"
        return "other"


def _mesh_axes_by_name(module: Module) -> dict[str, tuple[int, ...]]:
    """Collective name -> sizes of the mesh axes it runs over (from profan.sharding)."""
    try:
        from profan.sharding import infer_mesh

        mesh = infer_mesh(module)
    except Exception:  # no mesh inferable (or the module is not sharded): use the groups
        return {}
    found: dict[str, tuple[int, ...]] = {}
    shape = mesh.shape
    for collective in mesh.collectives:
        if collective.axes:
            found[collective.name] = tuple(shape[a] for a in collective.axes)
    return found


# ------------------------------------------------------------------------- score_module


def _trip_count(instruction: Instruction) -> int:
    text = instruction.attributes.get("backend_config")
    if not text:
        return 1
    try:
        config = json.loads(text)
        return int(config["known_trip_count"]["n"])
    except (ValueError, KeyError, TypeError):
        return 1


def _scheduled_computations(module: Module) -> list[tuple[Computation, int]]:
    """The entry and every computation it runs as non-fused code, with execution counts."""
    found: list[tuple[Computation, int]] = []
    seen: set[str] = set()

    def visit(computation: Computation, count: int) -> None:
        if computation.name in seen:
            return
        seen.add(computation.name)
        found.append((computation, count))
        for instruction in computation.instructions:
            if instruction.opcode not in CONTROL_FLOW:
                continue
            times = count * (_trip_count(instruction) if instruction.opcode == "while" else 1)
            for name in called_computations(instruction):
                try:
                    visit(module.computation(name), times)
                except KeyError:
                    continue

    visit(module.entry, 1)
    return found


def resolve_chip(chip: Chip | str | None, profile: Profile | None = None) -> Chip:
    if isinstance(chip, Chip):
        return chip
    if profile is not None:
        return chip_for_device(profile.device, override=chip)
    if chip is None:
        raise ValueError("a chip is needed to score a module without a trace")
    return get_chip(chip)


def score_module(module: Module, chip: Chip | str) -> pd.DataFrame:
    """Compile-time roofline of every op a module runs (entry + while bodies, calls, branches;
    not fused bodies), sorted by ideal time, longest first.  ``occurrences`` applies a while
    loop's known trip count when the backend config records one.
    """
    chip = resolve_chip(chip)
    model = CostModel(module)
    mesh_axes = _mesh_axes_by_name(module)
    devices = max(module.num_partitions, 1) * max(module.replica_count, 1)
    rows = []
    for computation, count in _scheduled_computations(module):
        for instruction in computation.instructions:
            if instruction.opcode in FREE or instruction.opcode in CONTROL_FLOW:
                continue
            cost = model.estimate(instruction)
            times = op_times(
                cost,
                chip,
                instruction,
                mesh_axes=mesh_axes.get(instruction.name),
                slice_devices=devices or None,
            )
            if cost.async_role == "start":
                times = OpTimes(0.0, 0.0, 0.0, 0.0, "async-start", times.notes)
            flops = cost.flops
            hbm = _roofline_bytes(cost)
            rows.append(
                {
                    "module": module.name,
                    "computation": computation.name,
                    "name": instruction.name,
                    "opcode": instruction.opcode,
                    "category": _category(instruction, module),
                    "occurrences": count,
                    "flops": None if flops is None else flops * count,
                    "hbm_bytes": hbm * count,
                    "ici_bytes": cost.ici_bytes * count,
                    "intensity": (flops / hbm) if flops and hbm else math.nan,
                    "t_compute_s": times.t_compute_s * count,
                    "t_hbm_s": times.t_hbm_s * count,
                    "t_ici_s": times.t_ici_s * count,
                    "t_host_s": times.t_host_s * count,
                    "roofline_s": times.roofline_s * count,
                    "bound_by": times.bound_by,
                    "dtype": cost.dtype,
                    "derivation": "; ".join(cost.derivation + times.notes),
                }
            )
    frame = pd.DataFrame(rows, columns=list(MODULE_COLUMNS))
    return frame.sort_values("roofline_s", ascending=False, kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------------- score


def _first(values: pd.Series) -> Any:
    for value in values:
        if value is not None and not (isinstance(value, float) and math.isnan(value)):
            return value
    return None


def _key_column(values: pd.Series) -> pd.Series:
    """Module keys as strings ('' for ops whose module is unknown), for joins."""
    return values.astype(object).where(values.notna(), "").astype(str)


@dataclass(slots=True)
class AsyncSpans:
    """Start-to-done spans of one async op from the trace's async line."""

    total_s: float  # summed over the recorded executions
    executions: int
    devices: tuple[int, ...]  # the devices the async line covers for this op


def async_spans(profile: Profile) -> dict[tuple[str, str], AsyncSpans]:
    """(module key, op name) -> the op's async spans, from ``profile.async_ops``."""
    spans = getattr(profile, "async_ops", None)
    if spans is None or spans.empty:
        return {}
    frame = spans.assign(_key=_key_column(spans["module_key"]))
    if "device" not in frame:
        frame = frame.assign(device=0)
    found: dict[tuple[str, str], AsyncSpans] = {}
    for (key, op_name), group in frame.groupby(["_key", "op_name"], sort=False):
        durations = pd.to_numeric(group["duration_s"], errors="coerce").dropna()
        devices = tuple(sorted(int(d) for d in group["device"].dropna().unique()))
        found[(str(key), str(op_name))] = AsyncSpans(
            float(durations.sum()), len(durations), devices
        )
    return found


def _async_efficiency(
    per_execution_s: float, spans: AsyncSpans | None
) -> tuple[float, float, int | None, str]:
    """Efficiency of an async done over its spans: (efficiency, span total, n, derivation)."""
    if spans is None or spans.executions == 0:
        return (
            math.nan,
            math.nan,
            None,
            (
                "async done: no start-to-done span in the trace, measured time is only the exposed "
                "wait, so efficiency is undefined"
            ),
        )
    devices = ",".join(str(d) for d in spans.devices) or "?"
    note = (
        f"async done: efficiency = ideal {per_execution_s:.3g} s x {spans.executions} spans "
        f"/ span total {spans.total_s:.3g} s (async line, device(s) {devices}); "
        "measured = exposed wait"
    )
    if spans.total_s <= 0 or per_execution_s <= 0:
        return math.nan, spans.total_s, spans.executions, note
    return per_execution_s * spans.executions / spans.total_s, spans.total_s, spans.executions, note


def _spans_of_done(
    spans_by_op: dict[tuple[str, str], AsyncSpans],
    module_key: str,
    op_name: str,
    instruction: Instruction | None,
) -> AsyncSpans | None:
    """A done's spans: under its own name (as TPU's async line names them), else under the name
    of the ``-start`` it waits on (its first operand)."""
    found = spans_by_op.get((module_key, op_name))
    if found is None and instruction is not None and instruction.operands:
        found = spans_by_op.get((module_key, instruction.operands[0].name))
    return found


def _per_op_rows(profile: Profile, chip: Chip) -> pd.DataFrame:
    """One row per (module, op) with the per-execution cost and roofline times."""
    spans_by_op = async_spans(profile)
    ops = profile.ops.assign(_key=_key_column(profile.ops["module_key"]))
    aggregations: dict[str, tuple[str, str]] = {
        "occurrences": ("duration_s", "size"),
        "measured_s": ("duration_s", "sum"),
    }
    for column in ("trace_flops", "trace_bytes_accessed", "source"):
        if column in ops:
            aggregations[column] = (column, "first")  # first non-null value
    grouped = ops.groupby(["module", "_key", "op_name"], sort=False, dropna=False)
    summary = grouped.agg(**aggregations).reset_index()
    models: dict[str, CostModel] = {}
    meshes: dict[str, dict[str, tuple[int, ...]]] = {}
    rows = []
    for record in summary.to_dict("records"):
        module_key, op_name = record["_key"], record["op_name"]
        module = profile.modules.get(module_key) if module_key else None
        instruction = profile.instruction(module_key, op_name) if module is not None else None
        cost: OpCost | None = None
        opcode = None
        category = "other"
        if instruction is not None and module is not None:
            if module_key not in models:
                models[module_key] = CostModel(module)
                meshes[module_key] = _mesh_axes_by_name(module)
            cost = models[module_key].estimate(instruction)
            opcode = instruction.opcode
            category = _category(instruction, module)
        cost_source = "profan"
        if cost is None:
            cost = OpCost(None, None, 0.0, 0.0)
            cost_source = "none"
        trace_flops = record.get("trace_flops")
        trace_bytes = record.get("trace_bytes_accessed")
        # Where profan cannot cost an op (an unknown kernel, a missing module) the compiler's own
        # per-op figures in the trace fill in, and cost_source says so.
        if cost.flops is None and trace_flops is not None and not pd.isna(trace_flops):
            cost.flops = float(trace_flops)
            cost_source = "trace"
        has_trace_bytes = trace_bytes is not None and not pd.isna(trace_bytes)
        if (cost_source == "none" or cost.unknown) and has_trace_bytes:
            cost.hbm_bytes_read, cost.hbm_bytes_written = float(trace_bytes), 0.0
            cost_source = "trace"
        mesh_axes = meshes.get(module_key, {}).get(op_name) if module is not None else None
        times = op_times(
            cost, chip, instruction, mesh_axes=mesh_axes, slice_devices=profile.device.count or None
        )
        if cost.async_role == "start":
            times = OpTimes(0.0, 0.0, 0.0, 0.0, "async-start", times.notes)
        is_async_done = cost.async_role == "done"
        occurrences = int(record["occurrences"])
        measured = float(record["measured_s"])
        roofline = times.roofline_s * occurrences
        efficiency = roofline / measured if measured > 0 and roofline > 0 else math.nan
        span_total, span_n, exposed_wait = math.nan, None, math.nan
        derivation = cost.derivation + times.notes
        if is_async_done:
            # The done's measured time is only the exposed wait for a transfer that ran alongside
            # other ops; the transfer itself is scored over its start-to-done spans.
            exposed_wait = measured
            efficiency, span_total, span_n, note = _async_efficiency(
                times.roofline_s, _spans_of_done(spans_by_op, module_key, op_name, instruction)
            )
            derivation = [*derivation, note]
        source = record.get("source")
        if (source is None or pd.isna(source)) and instruction is not None and module is not None:
            try:
                location = module.source_location(instruction)  # type: ignore[attr-defined]
                source = str(location) if location else None
            except Exception:  # the parser's view is optional here
                source = None
        rows.append(
            {
                "module": record["module"],
                "name": op_name,
                "opcode": opcode,
                "category": category,
                "occurrences": occurrences,
                "measured_s": measured,
                "flops": None if cost.flops is None else cost.flops * occurrences,
                "hbm_bytes": _roofline_bytes(cost) * occurrences,
                "ici_bytes": cost.ici_bytes * occurrences,
                "t_compute_s": times.t_compute_s * occurrences,
                "t_hbm_s": times.t_hbm_s * occurrences,
                "t_ici_s": times.t_ici_s * occurrences,
                "t_host_s": times.t_host_s * occurrences,
                "roofline_s": roofline,
                "bound_by": times.bound_by if cost_source != "none" else "unknown",
                "efficiency": efficiency,
                "source": source,
                "cost_source": cost_source,
                "dtype": cost.dtype,
                "async_role": cost.async_role,
                # which link an async transfer occupies (host links are full duplex)
                "link": (
                    f"{times.bound_by}:{cost.transfer_direction}"
                    if cost.transfer_direction
                    else times.bound_by
                ),
                "module_key": module_key or None,
                "async_span_s": span_total,
                "async_span_n": span_n,
                "exposed_wait_s": exposed_wait,
                "derivation": "; ".join(derivation),
            }
        )
    frame = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    frame["async_span_n"] = frame["async_span_n"].astype("Int64")
    return frame


STEP_COLUMNS = ["step", "measured_s", "ideal_s", "efficiency", "mfu", "model_flops"] + [
    f"share_{bound}" for bound in (*BOUNDS, "unknown")
]


def _steps(profile: Profile, chip: Chip, per_op: pd.DataFrame) -> pd.DataFrame:
    ops = profile.ops
    if ops.empty or "step" not in ops or profile.steps is None or profile.steps.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    per_exec = pd.DataFrame(
        {
            "_key": _key_column(per_op["module_key"]),
            "op_name": per_op["name"],
            "_roofline": per_op["roofline_s"] / per_op["occurrences"],
            "_flops": pd.to_numeric(per_op["flops"], errors="coerce") / per_op["occurrences"],
            "_bound": per_op["bound_by"],
            "_async": per_op["async_role"].notna(),
            "_link": per_op["link"],
        }
    )
    columns = ["module_key", "op_name", "step", "duration_s"]
    columns += [c for c in ("device", "trace_model_flops") if c in ops]
    frame = ops[columns].assign(_key=_key_column(ops["module_key"]))
    frame = frame[frame["step"].notna()]
    if "device" not in frame:
        frame = frame.assign(device=0)
    frame = frame.merge(per_exec, on=["_key", "op_name"], how="left")
    frame["_roofline"] = frame["_roofline"].fillna(0.0)
    frame["_bound"] = frame["_bound"].fillna("unknown")
    frame["_async"] = frame["_async"].fillna(False).astype(bool)
    # Ideal step on the busiest device: synchronous ops run one after another; async transfers
    # can hide behind them, but each link (host in/out, ICI) must still carry its own traffic.
    sync = frame[~frame["_async"]].groupby(["step", "device"])["_roofline"].sum()
    pools = frame[frame["_async"]].groupby(["step", "device", "_link"])["_roofline"].sum()
    pool_max = pools.groupby(level=["step", "device"]).max()
    per_device = pd.concat([sync, pool_max], axis=1).fillna(0.0).max(axis=1)
    ideal = per_device.groupby(level="step").max()
    devices = frame.groupby("step")["device"].nunique().clip(lower=1)
    profan_flops = frame.groupby("step")["_flops"].sum()
    if "trace_model_flops" in frame:
        model = frame.groupby("step")["trace_model_flops"].sum(min_count=1)
        model_flops = model.fillna(profan_flops)
    else:
        model_flops = profan_flops
    op_time = frame.groupby("step")["duration_s"].sum()
    by_bound = frame.groupby(["step", "_bound"])["duration_s"].sum().unstack(fill_value=0.0)
    peak = chip.device_peak_flops("bf16")
    rows = []
    for step_row in profile.steps.itertuples(index=False):
        step = step_row.step
        if step not in ideal.index:
            continue
        measured = float(step_row.duration_s)
        total = float(op_time.get(step, 0.0)) or 1.0
        shares = {
            f"share_{b}": float(by_bound.at[step, b]) / total if b in by_bound else 0.0
            for b in BOUNDS
        }
        shares["share_unknown"] = max(0.0, 1.0 - sum(shares.values()))
        step_ideal = float(ideal[step])
        step_model = float(model_flops.get(step, 0.0))
        rows.append(
            {
                "step": step,
                "measured_s": measured,
                "ideal_s": step_ideal,
                "efficiency": step_ideal / measured if measured > 0 else math.nan,
                "mfu": (
                    step_model / (peak * measured * int(devices[step]))
                    if measured > 0
                    else math.nan
                ),
                "model_flops": step_model,
                **shares,
            }
        )
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def score(profile: Profile, chip: Chip | str | None = None) -> Score:
    """Score every op of a loaded profile (aggregated over its executions) and every step."""
    chip = resolve_chip(chip, profile)
    per_op = _per_op_rows(profile, chip)
    per_op = per_op.sort_values("measured_s", ascending=False, kind="stable").reset_index(drop=True)
    steps = _steps(profile, chip, per_op)
    # Async transfers overlap other work (their measured time is only the exposed wait), so the
    # overall efficiency compares synchronous ops only.
    synchronous = per_op[per_op["async_role"].isna()]
    measured = float(synchronous["measured_s"].sum())
    roofline = float(synchronous["roofline_s"].sum())
    by_bound = per_op.groupby("bound_by")["measured_s"].sum()
    all_measured = float(per_op["measured_s"].sum())
    total_flops = float(pd.to_numeric(per_op["flops"], errors="coerce").fillna(0).sum())
    summary: dict[str, Any] = {
        "chip": chip.name,
        "chip_display_name": chip.display_name,
        "figure_sources": dict(chip.figure_sources),
        "peak_flops_per_s": chip.device_peak_flops("bf16"),
        "hbm_bytes_per_s": chip.device_hbm_bytes_per_s,
        "ops": len(per_op),
        "op_executions": int(per_op["occurrences"].sum()) if len(per_op) else 0,
        "measured_s": measured,
        "roofline_s": roofline,
        "efficiency": roofline / measured if measured > 0 else math.nan,
        "flops": total_flops,
        "share_by_bound": {
            str(b): float(t) / all_measured if all_measured else 0.0 for b, t in by_bound.items()
        },
        "unknown_cost_ops": per_op.loc[per_op["cost_source"] == "none", "name"].tolist(),
        "unmatched_events": sum(u.count for u in getattr(profile, "unmatched", [])),
    }
    if not steps.empty:
        summary["steps"] = len(steps)
        summary["step_measured_s"] = float(steps["measured_s"].mean())
        summary["step_ideal_s"] = float(steps["ideal_s"].mean())
        summary["mfu"] = float(steps["mfu"].mean())
    return Score(ops=per_op, steps=steps, chip=chip, summary=summary)


__all__ = [
    "AsyncSpans",
    "OpTimes",
    "Score",
    "async_spans",
    "op_times",
    "resolve_chip",
    "score",
    "score_module",
]
