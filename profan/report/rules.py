"""Suspicious-op rules.  Each is a small named function ``(report, ops, config) -> [Finding]``.

A rule looks at the per-op table (measured vs ideal), the op's HLO instruction and the timeline
facts the report computed (exposed time, idle gaps).  Thresholds live in ``RuleConfig``.
The per-instruction tests (``matmul_dims``, ``is_relayout``, ``padding_of`` …) are plain functions
so they can be checked on real HLO directly.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from profan.hlo.model import Computation, Instruction, Module, Shape
from profan.report import hlo_facts
from profan.report.config import RuleConfig
from profan.report.model import Finding, OpEntry, Report, _OpContext, hbm_capacity

Rule = Callable[[Report, list[_OpContext], RuleConfig], list[Finding]]


@dataclass(frozen=True, slots=True)
class RuleInfo:
    name: str
    summary: str
    check: Rule


RULES: dict[str, RuleInfo] = {}


def rule(name: str, summary: str) -> Callable[[Rule], Rule]:
    def register(check: Rule) -> Rule:
        RULES[name] = RuleInfo(name, summary, check)
        return check

    return register


def run_rules(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    findings: list[Finding] = []
    for info in RULES.values():
        if info.name in config.disabled:
            continue
        findings.extend(info.check(report, ops, config))
    findings.sort(key=lambda f: -f.time_s)
    return findings


# --------------------------------------------------------------------------------------------
# helpers on HLO


def _computation(module: Module | None, instr: Instruction) -> Computation | None:
    if module is None or instr.computation is None:
        return None
    try:
        return module.computation(instr.computation)
    except KeyError:
        return None


def operand_shape(module: Module | None, instr: Instruction, index: int) -> Shape | None:
    if index >= len(instr.operands):
        return None
    operand = instr.operands[index]
    if operand.shape is not None:
        return operand.shape
    computation = _computation(module, instr)
    found = computation.get(operand.name) if computation is not None else None
    return found.shape if found is not None else None


def called_computations(instr: Instruction) -> list[str]:
    called = getattr(instr, "called_computations", None)
    if isinstance(called, list):
        return [str(c) for c in called]
    names: list[str] = []
    for attribute in ("calls", "to_apply", "body", "condition"):
        text = instr.attributes.get(attribute)
        if text:
            names.extend(n.strip().lstrip("%") for n in text.strip("{}").split(","))
    return [n for n in names if n]


def _dims_attr(instr: Instruction, name: str) -> list[int]:
    text = instr.attributes.get(name, "").strip("{} ")
    return [int(x) for x in text.split(",") if x.strip().lstrip("-").isdigit()]


def find_dot(instr: Instruction, module: Module | None) -> tuple[Instruction, Module | None] | None:
    """The dot/convolution an op performs: itself, or the one inside a fusion it calls."""
    if instr.opcode in ("dot", "convolution"):
        return instr, module
    if instr.opcode != "fusion" or module is None:
        return None
    for name in called_computations(instr):
        try:
            computation = module.computation(name)
        except KeyError:
            continue
        for inner in computation.instructions:
            if inner.opcode in ("dot", "convolution"):
                return inner, module
    return None


@dataclass(frozen=True, slots=True)
class MatmulDims:
    batch: int
    m: int  # lhs non-contracting
    n: int  # rhs non-contracting
    k: int  # contracting
    dtype: str  # lhs element type


def matmul_dims(instr: Instruction, module: Module | None) -> MatmulDims | None:
    """Sizes of a dot: batch, lhs non-contracting (M), rhs non-contracting (N), contracting (K)."""
    if instr.opcode != "dot":
        return None
    lhs = operand_shape(module, instr, 0)
    rhs = operand_shape(module, instr, 1)
    if lhs is None or rhs is None or not lhs.is_array or not rhs.is_array:
        return None
    lhs_c = _dims_attr(instr, "lhs_contracting_dims")
    rhs_c = _dims_attr(instr, "rhs_contracting_dims")
    lhs_b = _dims_attr(instr, "lhs_batch_dims")
    rhs_b = _dims_attr(instr, "rhs_batch_dims")

    def product(shape: Shape, picked: list[int]) -> int:
        out = 1
        for d in picked:
            if d < len(shape.dims):
                out *= shape.dims[d]
        return out

    lhs_free = [d for d in range(lhs.rank) if d not in lhs_c and d not in lhs_b]
    rhs_free = [d for d in range(rhs.rank) if d not in rhs_c and d not in rhs_b]
    return MatmulDims(
        batch=product(lhs, lhs_b),
        m=product(lhs, lhs_free),
        n=product(rhs, rhs_free),
        k=product(lhs, lhs_c),
        dtype=lhs.dtype,
    )


_MOVE_ONLY = frozenset({"parameter", "copy", "transpose", "bitcast", "reshape", "tuple"})


def _destination(instr: Instruction) -> Shape:
    """Where a copy writes: its output, or for ``copy-start`` the tuple's second element."""
    if instr.opcode == "copy-start" and instr.shape.is_tuple and len(instr.shape.tuple_shapes) > 1:
        return instr.shape.tuple_shapes[1]
    return instr.shape


def _changes_layout(source: Shape | None, destination: Shape) -> bool:
    if source is None or source.layout is None or destination.layout is None:
        return False
    if source.layout.memory_space != destination.layout.memory_space:
        return False  # a move between memories (host offload, prefetch), not a relayout
    return (source.layout.minor_to_major, source.layout.tiles) != (
        destination.layout.minor_to_major,
        destination.layout.tiles,
    )


def is_relayout(instr: Instruction, module: Module | None) -> bool:
    """A transpose, a copy that changes the layout, or a fusion that only does those."""
    if instr.opcode == "transpose":
        return True
    if instr.opcode in ("copy", "copy-start"):
        return _changes_layout(operand_shape(module, instr, 0), _destination(instr))
    if instr.opcode != "fusion" or module is None:
        return False
    called = called_computations(instr)
    for name in called:
        try:
            computation = module.computation(name)
        except KeyError:
            return False
        opcodes = {i.opcode for i in computation.instructions}
        if not opcodes <= _MOVE_ONLY:
            return False
        if not any(
            i.opcode == "transpose"
            or (i.opcode == "copy" and _changes_layout(operand_shape(module, i, 0), i.shape))
            for i in computation.instructions
        ):
            return False
    return bool(called)


def padding_of(instr: Instruction, module: Module | None) -> float:
    """Worst stored/logical ratio over the op's output and operands (tiled layouts)."""
    shapes = list(instr.shape.leaves())
    for index in range(len(instr.operands)):
        shape = operand_shape(module, instr, index)
        if shape is not None:
            shapes.extend(shape.leaves())
    return max((hlo_facts.padded_ratio(s) for s in shapes if s.is_array), default=1.0)


def feeds_from_parameter(instr: Instruction, module: Module | None, depth: int = 6) -> bool:
    """Whether the op's first operand is (a reshaped/converted view of) a parameter: a weight."""
    computation = _computation(module, instr)
    current = instr
    for _ in range(depth):
        if computation is None or not current.operands:
            return False
        found = computation.get(current.operands[0].name)
        if found is None:
            return False
        if found.opcode == "parameter":
            return True
        if found.opcode not in ("bitcast", "reshape", "convert", "copy", "transpose"):
            return False
        current = found
    return False


def collective_identity(instr: Instruction) -> tuple[str, ...]:
    """What makes two collectives the same transfer: kind, operands, groups, dimensions."""
    return (
        instr.opcode,
        *instr.operand_names,
        instr.attributes.get("replica_groups", ""),
        instr.attributes.get("dimensions", ""),
        instr.attributes.get("source_target_pairs", ""),
        instr.computation or "",
    )


# --------------------------------------------------------------------------------------------
# the rules


def _total_time(ops: list[_OpContext]) -> float:
    return sum(c.entry.measured_s for c in ops) or 1.0


def _significant(ops: list[_OpContext], config: RuleConfig) -> list[_OpContext]:
    total = _total_time(ops)
    return [c for c in ops if c.entry.measured_s >= config.min_time_share * total]


def _finding(c: _OpContext, rule_name: str, message: str, look_at: str, time_s: float) -> Finding:
    e = c.entry
    return Finding(rule_name, message, look_at, e.key, e.module, e.name, e.source, time_s)


def _fmt_s(seconds: float) -> str:
    from profan.report.format import seconds as fmt

    return fmt(seconds)


def _span_all_executions(e: OpEntry) -> float | None:
    """An async done's span time scaled from the executions the async line records to all."""
    if e.async_span_s is None or not e.async_span_n:
        return None
    return e.async_span_s * e.occurrences / e.async_span_n


def _far_candidates(ops: list[_OpContext], config: RuleConfig) -> list[_OpContext]:
    """Significant ops by measured time, plus async transfers whose span (not their possibly
    hidden wait) is significant: a slow transfer matters even while it is hidden."""
    total = _total_time(ops)
    picked = _significant(ops, config)
    seen = {id(c) for c in picked}
    for c in ops:
        span = _span_all_executions(c.entry)
        if id(c) not in seen and span is not None and span >= config.min_time_share * total:
            picked.append(c)
    return picked


@rule(
    "far-from-roofline", "efficiency (ideal / measured, or / span for async ops) below a threshold"
)
def far_from_roofline(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    out = []
    for c in _far_candidates(ops, config):
        e = c.entry
        if e.efficiency is None or e.roofline_s <= 0 or e.efficiency >= config.efficiency_below:
            continue
        span = _span_all_executions(e)
        if span is not None and e.async_span_n:
            # An async transfer: efficiency is over its start-to-done span; what it can cost the
            # step is at most its exposed wait.
            ideal_spans = e.roofline_s * e.async_span_n / max(e.occurrences, 1)
            out.append(
                _finding(
                    c,
                    "far-from-roofline",
                    f"{e.efficiency:.1%} of its {e.bound_by} roofline over its async span: span "
                    f"{_fmt_s(e.async_span_s or 0.0)} vs ideal {_fmt_s(ideal_spans)} "
                    f"({e.async_span_n} executions on the trace's async line); exposed wait "
                    f"{_fmt_s(e.measured_s)} (all devices)",
                    "the transfer's bandwidth (link, contention with other transfers) and, if "
                    "the wait is large, starting it earlier",
                    min(e.measured_s, max(span - e.roofline_s, 0.0)),
                )
            )
            continue
        look = {
            "compute": "the op's shapes and dtype (MXU/tensor-core utilisation, padding)",
            "hbm": "its layouts and fusion (bytes moved vs. needed)",
            "ici": "the collective's group and overlap with compute",
        }.get(e.bound_by, "what the op waits on (latency, launch overhead, dependencies)")
        out.append(
            _finding(
                c,
                "far-from-roofline",
                f"{e.efficiency:.1%} of its {e.bound_by} roofline: measured {_fmt_s(e.measured_s)}"
                f" vs ideal {_fmt_s(e.roofline_s)} (all devices)",
                look,
                e.measured_s - e.roofline_s,
            )
        )
    return out


@rule("exposed-collective", "collective time not overlapped with compute on the same device")
def exposed_collective(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    out = []
    for c in _significant(ops, config):
        e = c.entry
        if e.category != "collective" or not e.exposed_s or e.measured_s <= 0:
            continue
        fraction = e.exposed_s / e.measured_s
        if fraction > config.exposed_fraction_above:
            out.append(
                _finding(
                    c,
                    "exposed-collective",
                    f"{fraction:.0%} of its time ({_fmt_s(e.exposed_s)}, all devices) is not "
                    "hidden behind compute",
                    "async collectives / scheduling: start it earlier or split it so compute can "
                    "overlap (e.g. collective matmul, latency-hiding scheduler flags)",
                    e.exposed_s,
                )
            )
    return out


@rule("latency-bound-collectives", "many small collectives that could be combined")
def latency_bound_collectives(
    report: Report, ops: list[_OpContext], config: RuleConfig
) -> list[Finding]:
    small: dict[str, list[_OpContext]] = defaultdict(list)
    for c in ops:
        e = c.entry
        if e.category != "collective" or e.opcode.endswith("-done"):
            continue
        size = (e.collective or {}).get("bytes")
        if e.bound_by == "latency" or (size is not None and 0 < size < config.latency_bytes_below):
            small[e.module].append(c)
    out = []
    for module, group in small.items():
        if len(group) < config.latency_min_count:
            continue
        total = sum(c.entry.measured_s for c in group)
        for c in group:
            out.append(
                _finding(
                    c,
                    "latency-bound-collectives",
                    f"one of {len(group)} small collectives in {module} "
                    f"(< {config.latency_bytes_below / 1e3:.0f} kB each, {_fmt_s(total)} together "
                    "over all devices)"
                    ": each pays the per-hop latency",
                    "combine them into one (XLA's all-reduce/all-gather combiner thresholds, or "
                    "concatenate the tensors before the collective)",
                    c.entry.measured_s,
                )
            )
    return out


@rule("relayout-copy", "copies/transposes moving a large share of the step's bytes")
def relayout_copy(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    total_bytes = sum(c.entry.hbm_bytes for c in ops)
    if total_bytes <= 0:
        return []
    out = []
    for c in _significant(ops, config):
        if c.instruction is None or not is_relayout(c.instruction, c.module):
            continue
        share = c.entry.hbm_bytes / total_bytes
        if share > config.relayout_bytes_share_above:
            out.append(
                _finding(
                    c,
                    "relayout-copy",
                    f"a layout change moving {share:.0%} of all HBM bytes",
                    "the layouts of its producer and consumer (a transpose in the model, or "
                    "sharding that disagrees between them)",
                    c.entry.measured_s,
                )
            )
    return out


@rule("tile-padding", "tiled layouts storing much more than the logical bytes")
def tile_padding(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    out = []
    for c in _significant(ops, config):
        if c.instruction is None:
            continue
        ratio = padding_of(c.instruction, c.module)
        if ratio > config.padding_ratio_above:
            out.append(
                _finding(
                    c,
                    "tile-padding",
                    f"tiled layout stores {ratio:.2f}× the logical elements",
                    "pad the minor dimensions to the tile (multiples of 8×128; 128/256 for the "
                    "MXU) or reorder dimensions so a large one is minor",
                    c.entry.measured_s * (1 - 1 / ratio),
                )
            )
    return out


def _mxu_size(report: Report, config: RuleConfig) -> int:
    for name, value in report.chip.items():
        if "mxu" in name.lower() and isinstance(value, int) and value > 0:
            return value
    return config.mxu_size


@rule("small-matmul", "matmul dims below the MXU size")
def small_matmul(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    if report.device.get("kind") not in config.mxu_device_kinds:
        return []
    mxu = _mxu_size(report, config)
    out = []
    for c in _significant(ops, config):
        if c.instruction is None:
            continue
        found = find_dot(c.instruction, c.module)
        dims = matmul_dims(*found) if found else None
        if dims is None:
            continue
        small = {n: v for n, v in (("M", dims.m), ("N", dims.n), ("K", dims.k)) if 0 < v < mxu}
        if small:
            listed = ", ".join(f"{n}={v}" for n, v in small.items())
            out.append(
                _finding(
                    c,
                    "small-matmul",
                    f"matmul with {listed} below the {mxu}-wide MXU",
                    "batch more tokens per chip or shard differently so each dim is ≥ the MXU size",
                    c.entry.measured_s,
                )
            )
    return out


@rule("f32-matmul", "matmuls in f32 where bf16 was likely meant")
def f32_matmul(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    if report.device.get("kind") not in config.f32_matmul_device_kinds:
        return []
    out = []
    for c in _significant(ops, config):
        if c.instruction is None:
            continue
        found = find_dot(c.instruction, c.module)
        dims = matmul_dims(*found) if found else None
        if dims is not None and dims.dtype in ("f32", "f64"):
            out.append(
                _finding(
                    c,
                    "f32-matmul",
                    f"{dims.dtype} matmul: runs at a fraction of the bf16 rate",
                    "cast the operands (or set the dot's precision / preferred_element_type) to "
                    "bf16 where the model allows",
                    c.entry.measured_s,
                )
            )
    return out


@rule("host-transfer", "host transfers on the critical path")
def host_transfer(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    out = []
    for c in _significant(ops, config):
        e = c.entry
        if e.category != "host" or e.measured_s <= 0 or e.opcode.endswith("-start"):
            continue
        exposed = e.exposed_s if e.exposed_s is not None else e.measured_s
        if exposed / e.measured_s > config.host_exposed_fraction_above:
            out.append(
                _finding(
                    c,
                    "host-transfer",
                    f"host transfer with {_fmt_s(exposed)} (all devices) not overlapped with "
                    "device compute",
                    "prefetch the input (double-buffer infeed / device_put ahead) or keep the "
                    "data on the device",
                    exposed,
                )
            )
    return out


@rule("large-allgather", "all-gathers of weights larger than a fraction of HBM")
def large_allgather(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    capacity = hbm_capacity(report.chip)
    if not capacity:
        return []
    out = []
    for c in ops:
        e = c.entry
        if c.instruction is None or (e.collective or {}).get("kind") != "all-gather":
            continue
        size = hlo_facts.shape_bytes(c.instruction.shape)
        if size > config.allgather_hbm_fraction_above * capacity and feeds_from_parameter(
            c.instruction, c.module
        ):
            out.append(
                _finding(
                    c,
                    "large-allgather",
                    f"gathers a weight of {size / 1e9:.2f} GB ({size / capacity:.0%} of HBM)",
                    "keep the weight sharded (FSDP gathers layer by layer) or shard it along "
                    "an axis the matmul contracts",
                    e.measured_s,
                )
            )
    return out


@rule("repeated-collective", "the same collective on the same data more than once")
def repeated_collective(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    groups: dict[tuple[str, ...], list[_OpContext]] = defaultdict(list)
    for c in ops:
        if c.instruction is None or c.entry.category != "collective":
            continue
        if c.instruction.opcode.endswith("-done"):
            continue
        groups[(c.entry.module, *collective_identity(c.instruction))].append(c)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        names = ", ".join(c.entry.name for c in group)
        for c in group:
            out.append(
                _finding(
                    c,
                    "repeated-collective",
                    f"{len(group)} identical {c.instruction.opcode}s on the same operand "  # type: ignore[union-attr]
                    f"({names})",
                    "reuse the first result (the sharding of its consumers may force the "
                    "repeat: check their in/out shardings)",
                    c.entry.measured_s,
                )
            )
    return out


def _ratio_text(ratio: float) -> str:
    """``45% of`` below 2, ``30× `` above (3039% reads badly)."""
    return f"{ratio:.0%} of" if ratio < 2 else f"{ratio:.0f}×"


@rule("idle-gaps", "idle time between steps or inside them")
def idle_gaps(report: Report, ops: list[_OpContext], config: RuleConfig) -> list[Finding]:
    summary = report.summary
    median = summary.get("step_time_median_s") or 0.0
    out = []
    gap = summary.get("inter_step_gap_max_s") or 0.0
    if median > 0 and gap > config.idle_gap_fraction_above * median:
        out.append(
            Finding(
                "idle-gaps",
                f"devices idle up to {_fmt_s(gap)} between steps ({_ratio_text(gap / median)} "
                "the median step)",
                "the host loop: data loading, Python overhead, blocking on results "
                "(block_until_ready, printing metrics) between steps",
                time_s=float(summary.get("inter_step_gap_total_s") or gap),
            )
        )
    span = summary.get("busy_span_s") or 0.0
    idle = summary.get("idle_s") or 0.0
    if span > 0 and idle > config.idle_gap_fraction_above * span:
        out.append(
            Finding(
                "idle-gaps",
                f"devices idle {idle / span:.0%} of the time between their first and last op "
                f"({_fmt_s(idle)} per device)",
                "dependencies on the host (callbacks, transfers) or launch overhead between "
                "small ops",
                time_s=idle,
            )
        )
    return out
