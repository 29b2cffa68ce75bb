"""Suspicious-op rules.  Each is a small named function ``(report, ops, config) -> [Finding]``.

A rule looks at the per-op table (measured vs ideal), the op's HLO instruction and the timeline
facts the report computed (exposed time, idle gaps).  Thresholds live in ``RuleConfig``; what a
rule asks of one instruction is in ``profan.report.rules.hlo_checks``.  Each finding states what
fixing it would save; a finding under its rule's floor (``RuleInfo.floors``,
``profan.report.rules.savings``) stays silent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from profan.hlo.model import Instruction, Module
from profan.hlo.views import custom_call_target
from profan.report.format import percent, seconds, si
from profan.report.model import Finding, OpEntry, Report, RuleEntry, RuleValue
from profan.report.rules.advice import cost_unknown_advice
from profan.report.rules.config import RuleConfig
from profan.report.rules.hlo_checks import (
    collective_identity,
    feeds_from_parameter,
    find_dot,
    is_relayout,
    matmul_dims,
    padding_of,
    shape_bytes,
)
from profan.report.rules.savings import MEMORY_FLOORS, TIME_FLOOR, above_floor, ranked, with_shares


@dataclass(slots=True)
class OpContext:
    """What a rule sees of one op: its report entry and, when the profile has its HLO, the
    instruction and its module."""

    entry: OpEntry
    instruction: Instruction | None
    module: Module | None


Rule = Callable[[Report, list[OpContext], RuleConfig], list[Finding]]


@dataclass(frozen=True, slots=True)
class RuleInfo:
    name: str
    summary: str
    check: Rule
    thresholds: tuple[str, ...] = ()  # the RuleConfig fields the rule compares against
    # the RuleConfig fields below which a finding stays silent: savings floors
    # (profan.report.rules.savings), else the rule's own thresholds are its floor
    floors: tuple[str, ...] = (TIME_FLOOR,)


RULES: dict[str, RuleInfo] = {}


def rule(
    name: str,
    summary: str,
    thresholds: tuple[str, ...] = (),
    floors: tuple[str, ...] = (TIME_FLOOR,),
) -> Callable[[Rule], Rule]:
    def register(check: Rule) -> Rule:
        RULES[name] = RuleInfo(name, summary, check, thresholds, floors)
        return check

    return register


def _values(config: RuleConfig, names: tuple[str, ...]) -> dict[str, RuleValue]:
    return {
        name: list(value) if isinstance(value, tuple) else value
        for name in names
        for value in [getattr(config, name)]
    }


def rule_table(config: RuleConfig) -> dict[str, RuleEntry]:
    """Every rule with what it checks and the thresholds it used (JSON ``rules``), so a reader
    of a finding sees the line it crossed."""
    return {
        info.name: RuleEntry(
            summary=info.summary,
            thresholds=_values(config, info.thresholds),
            floors=_values(config, info.floors),
            enabled=info.name not in config.disabled,
        )
        for info in RULES.values()
    }


def run_rules(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    """The findings above their rules' floors, each with its saving's share, ranked by it."""
    findings: list[Finding] = []
    for info in RULES.values():
        if info.name in config.disabled:
            continue
        found = (with_shares(f, report) for f in info.check(report, ops, config))
        findings.extend(f for f in found if above_floor(f, info.floors, config))
    return ranked(findings)


# --------------------------------------------------------------------------------------------
# the rules


def _total_time(ops: list[OpContext]) -> float:
    return sum(c.entry.measured_s for c in ops) or 1.0


def _significant(ops: list[OpContext], config: RuleConfig) -> list[OpContext]:
    total = _total_time(ops)
    return [c for c in ops if c.entry.measured_s >= config.min_time_share * total]


def _finding(
    c: OpContext,
    rule_name: str,
    message: str,
    look_at: str,
    saving_s: float | None,
    saving_from: str,
    time_s: float | None = None,
) -> Finding:
    """A finding on one op: ``saving_s`` (all devices, None: unknown) and how it was estimated;
    ``time_s``, the time at stake, is the op's measured time unless given."""
    e = c.entry
    return Finding(
        rule_name,
        message,
        look_at,
        e.key,
        e.module,
        e.name,
        e.source,
        e.measured_s if time_s is None else time_s,
        saving_s=None if saving_s is None else max(saving_s, 0.0),
        saving_from=saving_from,
    )


def _span_all_executions(e: OpEntry) -> float | None:
    """An async done's span time scaled from the executions the async line records to all."""
    if e.async_span_s is None or not e.async_span_n:
        return None
    return e.async_span_s * e.occurrences / e.async_span_n


def _far_candidates(ops: list[OpContext], config: RuleConfig) -> list[OpContext]:
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
    "far-from-roofline",
    "efficiency (ideal / measured, or / span for async ops) below a threshold; never for an op "
    "whose FLOPs or bytes are unknown or only a lower bound",
    ("efficiency_below", "min_time_share"),
)
def far_from_roofline(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    out = []
    for c in _far_candidates(ops, config):
        e = c.entry
        if e.efficiency is None or e.roofline_s <= 0 or e.efficiency >= config.efficiency_below:
            continue
        if not e.cost_known:
            continue  # its ideal is only a lower bound: `cost-unknown` says so instead
        span = _span_all_executions(e)
        if span is not None and e.async_span_n:
            # An async transfer: efficiency is over its start-to-done span; what it can cost the
            # step is at most its exposed wait.
            ideal_spans = e.roofline_s * e.async_span_n / max(e.occurrences, 1)
            out.append(
                _finding(
                    c,
                    "far-from-roofline",
                    f"{percent(e.efficiency)} of its {e.bound_by} roofline over its async span: "
                    f"span {seconds(e.async_span_s or 0.0)} vs ideal {seconds(ideal_spans)} "
                    f"({e.async_span_n} executions on the trace's async line); exposed wait "
                    f"{seconds(e.measured_s)} (all devices)",
                    "the transfer's bandwidth (link, contention with other transfers) and, if "
                    "the wait is large, starting it earlier",
                    min(e.measured_s, max(span - e.roofline_s, 0.0)),
                    "its exposed wait, at most span − ideal",
                )
            )
            continue
        look = {
            "compute": "the op's shapes and dtype (MXU/tensor-core utilisation, padding)",
            "transcendental": "the transcendentals it evaluates per element (exp, log, tanh, "
            "…: the TPU's EUP or the GPU's special function units bound it)",
            "hbm": "its layouts and fusion (bytes moved vs. needed)",
            "ici": "the collective's group and overlap with compute",
        }.get(e.bound_by, "what the op waits on (latency, launch overhead, dependencies)")
        out.append(
            _finding(
                c,
                "far-from-roofline",
                f"{percent(e.efficiency)} of its {e.bound_by} roofline: measured "
                f"{seconds(e.measured_s)} vs ideal {seconds(e.roofline_s)} (all devices)",
                look,
                e.measured_s - e.roofline_s,
                "measured − ideal",
            )
        )
    return out


@rule(
    "cost-unknown",
    "ops whose FLOPs or bytes profan cannot cost (a custom call with no model, an opcode or fused "
    "instruction it does not know, an op joined to no HLO); the saving is unknown",
    ("min_time_share",),
    floors=("min_time_share",),
)
def cost_unknown(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    by_target: dict[str, list[OpContext]] = defaultdict(list)
    for c in ops:
        e = c.entry
        if "unknown" not in (e.flops_source, e.bytes_source):
            continue
        target = custom_call_target(c.instruction) if c.instruction is not None else None
        by_target[target or e.opcode].append(c)
    floor = config.min_time_share * _total_time(ops)
    out = []
    for target, group in by_target.items():
        group.sort(key=lambda c: -c.entry.measured_s)
        total = sum(c.entry.measured_s for c in group)
        if total < floor:
            continue  # under the floor: the unknown cost moves no figure of the report much
        unknown = sorted(
            {what for c in group for what, source in (("FLOPs", c.entry.flops_source),
             ("bytes", c.entry.bytes_source)) if source == "unknown"}
        )  # fmt: skip
        names = ", ".join(c.entry.label for c in group[:3]) + (", …" if len(group) > 3 else "")
        heaviest = group[0]
        out.append(
            _finding(
                heaviest,
                "cost-unknown",
                f"{' and '.join(unknown)} of {target} unknown: {len(group)} op(s) ({names}), "
                f"{seconds(total)} (all devices); no efficiency is judged for them",
                cost_unknown_advice(
                    heaviest.entry.opcode, heaviest.instruction is not None, target
                ),
                None,
                "unknown: the ops' ideal time is unknown",
                time_s=total,
            )
        )
    return out


@rule(
    "exposed-collective",
    "collective time not overlapped with compute on the same device",
    ("exposed_fraction_above", "min_time_share"),
)
def exposed_collective(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
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
                    f"{percent(fraction, 0)} of its time ({seconds(e.exposed_s)}, all devices) "
                    "is not hidden behind compute",
                    "async collectives / scheduling: start it earlier or split it so compute can "
                    "overlap (e.g. collective matmul, latency-hiding scheduler flags)",
                    e.exposed_s,
                    "its exposed time",
                )
            )
    return out


@rule(
    "latency-bound-collectives",
    "many small collectives that could be combined",
    ("latency_bytes_below", "latency_min_count"),
)
def latency_bound_collectives(
    report: Report, ops: list[OpContext], config: RuleConfig
) -> list[Finding]:
    small: dict[str, list[OpContext]] = defaultdict(list)
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
                    f"(< {si(config.latency_bytes_below, 'B')} each, {seconds(total)} together "
                    "over all devices)"
                    ": each pays the per-hop latency",
                    "combine them into one (XLA's all-reduce/all-gather combiner thresholds, or "
                    "concatenate the tensors before the collective)",
                    c.entry.measured_s * (len(group) - 1) / len(group),
                    f"combined, the {len(group)} pay one latency: (n−1)/n of its time",
                )
            )
    return out


@rule(
    "relayout-copy",
    "copies/transposes moving a large share of the step's bytes",
    ("relayout_bytes_share_above", "min_time_share"),
)
def relayout_copy(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
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
                    f"a layout change moving {percent(share, 0)} of all HBM bytes",
                    "the layouts of its producer and consumer (a transpose in the model, or "
                    "sharding that disagrees between them)",
                    c.entry.measured_s,
                    "its measured time, were the copy not needed",
                )
            )
    return out


@rule(
    "tile-padding",
    "tiled layouts storing much more than the logical bytes",
    ("padding_ratio_above", "min_time_share"),
)
def tile_padding(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
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
                    "the padded share of its time",
                )
            )
    return out


def _mxu_size(report: Report, config: RuleConfig) -> int:
    """The chip's own matrix unit size, else ``[rules] mxu_size``."""
    size = report.chip.mxu_size
    return size if isinstance(size, int) and size > 0 else config.mxu_size


@rule(
    "small-matmul",
    "matmul dims below the MXU size",
    ("mxu_size", "mxu_device_kinds", "min_time_share"),
)
def small_matmul(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    if report.device.kind not in config.mxu_device_kinds:
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
                    c.entry.measured_s - c.entry.roofline_s,
                    "at most measured − ideal",
                )
            )
    return out


@rule(
    "f32-matmul",
    "matmuls in f32 where bf16 was likely meant",
    ("f32_matmul_device_kinds", "min_time_share"),
)
def f32_matmul(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    if report.device.kind not in config.f32_matmul_device_kinds:
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
                    c.entry.measured_s - c.entry.roofline_s,
                    "measured − ideal at its dtype's rate (bf16's ideal is lower: more)",
                )
            )
    return out


@rule(
    "host-transfer",
    "host transfers on the critical path",
    ("host_exposed_fraction_above", "min_time_share"),
)
def host_transfer(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
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
                    f"host transfer with {seconds(exposed)} (all devices) not overlapped with "
                    "device compute",
                    "prefetch the input (double-buffer infeed / device_put ahead) or keep the "
                    "data on the device",
                    exposed,
                    "its exposed time",
                )
            )
    return out


@rule(
    "large-allgather",
    "all-gathers of weights larger than a fraction of HBM",
    ("allgather_hbm_fraction_above",),
    floors=MEMORY_FLOORS,
)
def large_allgather(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    capacity = report.chip.hbm_capacity_bytes
    if not capacity:
        return []
    out = []
    for c in ops:
        e = c.entry
        if c.instruction is None or (e.collective or {}).get("kind") != "all-gather":
            continue
        size = shape_bytes(c.instruction.shape)
        if size > config.allgather_hbm_fraction_above * capacity and feeds_from_parameter(
            c.instruction, c.module
        ):
            found = _finding(
                c,
                "large-allgather",
                f"gathers a weight of {si(size, 'B')} ({percent(size / capacity, 0)} of HBM)",
                "keep the weight sharded (FSDP gathers layer by layer) or shard it along "
                "an axis the matmul contracts",
                None,
                "the gathered weight's bytes per device",
            )
            found.saving_bytes = float(size)
            out.append(found)
    return out


@rule("repeated-collective", "the same collective on the same data more than once")
def repeated_collective(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    groups: dict[tuple[str, ...], list[OpContext]] = defaultdict(list)
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
                    "its measured time, were the repeat reused",
                )
            )
    return out


def _ratio_text(ratio: float) -> str:
    """``45% of`` below 2, ``30× `` above (3039% reads badly)."""
    return f"{percent(ratio, 0)} of" if ratio < 2 else f"{ratio:.0f}×"


@rule("idle-gaps", "idle time between steps or inside them", ("idle_gap_fraction_above",))
def idle_gaps(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    summary = report.summary
    median = summary.step_time_median_s or 0.0
    devices = max(summary.device_count, 1)  # the figures are per device; savings all devices
    out = []
    gap = summary.inter_step_gap_max_s
    if median > 0 and gap > config.idle_gap_fraction_above * median:
        out.append(
            Finding(
                "idle-gaps",
                f"devices idle up to {seconds(gap)} between steps ({_ratio_text(gap / median)} "
                "the median step)",
                "the host loop: data loading, Python overhead, blocking on results "
                "(block_until_ready, printing metrics) between steps",
                time_s=summary.inter_step_gap_total_s or gap,
                saving_s=(summary.inter_step_gap_total_s or gap) * devices,
                saving_from="the gaps between steps, all devices",
            )
        )
    span = summary.busy_span_s
    idle = summary.idle_s
    if span > 0 and idle > config.idle_gap_fraction_above * span:
        out.append(
            Finding(
                "idle-gaps",
                f"devices idle {percent(idle / span, 0)} of the time between their first and last "
                f"op ({seconds(idle)} per device)",
                "dependencies on the host (callbacks, transfers) or launch overhead between "
                "small ops",
                time_s=idle,
                saving_s=idle * devices,
                saving_from="the idle time, all devices",
            )
        )
    return out
