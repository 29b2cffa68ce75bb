"""From a scored profile to a ``Report``: one entry per op, the summary, the rules' findings.

The per-op figures and facts come from the scored ops' records (``Score.ops``: cost, roofline
terms, scope, op path, source, program position, result shape, collective group and axes);
sharding's analysis adds each matmul's global shapes and splits.  The only HLO this module
touches is what it hands the rules (``rules.OpContext``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from profan.chips import Chip
from profan.hlo.model import Instruction, Module
from profan.report import keys
from profan.report.analysis import summary
from profan.report.analysis.gemms import gemm_rows
from profan.report.analysis.hosts import hosts_section, straggler_findings
from profan.report.analysis.kernels import op_kernels
from profan.report.analysis.memory import memory_section
from profan.report.analysis.notes import distinct
from profan.report.analysis.splits import matmul_global_shapes, matmul_splits, matmuls_by_name
from profan.report.format import partial_devices_note
from profan.report.model import (
    ChipSection,
    Device,
    OpEntry,
    Report,
    Scalar,
    Trace,
    UnmatchedGroup,
)
from profan.report.rules import catalogue as rules
from profan.report.rules import memory as memory_rules  # noqa: F401  (registers its rules)
from profan.report.rules.config import RuleConfig
from profan.report.rules.savings import ranked
from profan.roofline import CollectiveFacts, OpRecord, Score
from profan.sharding import ShardingReport
from profan.trace.profile import DeviceInfo, Profile

# Sorts ops without an instruction after every op of their module when numbering shared keys.
_NO_POSITION = 1 << 30


@dataclass(slots=True)
class Analysis:
    """Everything a report is built from."""

    profile: Profile
    score: Score
    shardings: dict[str, ShardingReport] = field(default_factory=dict)  # by module key


def chip_section(chip: Chip) -> ChipSection:
    """The chip's catalogue fields (scalars and tables, ``Chip``'s order) plus the per-device
    figures the report uses, and where they came from (``source``: the trace's own figures, or
    the catalogue)."""
    return ChipSection(
        name=chip.name,
        display_name=chip.display_name,
        kind=chip.kind,
        peak_flops=dict(chip.peak_flops),
        hbm_bytes=chip.hbm_bytes,
        hbm_bytes_per_s=chip.hbm_bytes_per_s,
        ici_link_bytes_per_s_uni=chip.ici_link_bytes_per_s_uni,
        ici_link_bytes_per_s_bi=chip.ici_link_bytes_per_s_bi,
        ici_links=chip.ici_links,
        topology=chip.topology,
        ici_hop_latency_s=chip.ici_hop_latency_s,
        dcn_bytes_per_s=chip.dcn_bytes_per_s,
        pcie_bytes_per_s=chip.pcie_bytes_per_s,
        wraparound=chip.wraparound,
        transcendentals_per_s=chip.transcendentals_per_s,
        devices_per_chip=chip.devices_per_chip,
        tensorcores_per_chip=chip.tensorcores_per_chip,
        megacore=chip.megacore,
        mxu_size=chip.mxu_size or None,
        vendor=chip.vendor,
        approximate=chip.approximate,
        sources=dict(chip.sources),
        figure_sources=dict(chip.figure_sources),
        peak_flops_per_s=chip.device_peak_flops("bf16") or None,
        hbm_capacity_bytes=chip.device_hbm_capacity_bytes or None,
        source=chip.figures_source,
        hbm_bytes_per_s_device=chip.device_hbm_bytes_per_s or None,
        transcendentals_per_s_device=chip.device_transcendentals_per_s,
    )


def _device(device: DeviceInfo) -> Device:
    return Device(
        kind=device.kind,
        type=device.type_string,
        count=int(device.count),
        hosts=list(device.hosts),
        peak_flops_per_s=device.peak_flops_per_s,
        peak_hbm_bytes_per_s=device.peak_hbm_bytes_per_s,
    )


def _collective(facts: CollectiveFacts | None) -> dict[str, Any] | None:
    """The JSON form of a collective's facts (schema 1's field names)."""
    if facts is None:
        return None
    return {
        "kind": facts.kind,
        "group_size": facts.group_size,
        "groups": facts.num_groups,
        "bytes": facts.output_bytes,
        "axes": list(facts.axes) if facts.axes else None,
    }


def _global_shape(sharding: ShardingReport | None, name: str) -> list[str]:
    """A sharded op's global output shape, from its ``sharding=`` annotation."""
    shape = sharding.global_shapes.get(name) if sharding is not None else None
    return [shape] if shape else []


# The record's fields an entry has in the same form, copied as they are (a new per-op figure
# is a field of both: nothing here changes); the entry's other fields are set below.
_SAME = tuple(
    name
    for name in sorted(set(OpEntry.__dataclass_fields__) & set(OpRecord.__dataclass_fields__))
    if name not in {"opcode", "flops", "scope", "collective", "faster_executions"}
)


def _entry(record: OpRecord, **others: Any) -> OpEntry:
    """The report's entry of a scored op: the record's figures, and ``others``."""
    same = {name: getattr(record, name) for name in _SAME}
    return OpEntry(
        **same,
        opcode=record.opcode or "unknown",
        flops=record.flops if record.flops is not None else 0.0,  # (flops_source: unknown)
        scope=record.scope or record.op_path,
        collective=_collective(record.collective),
        faster_executions=record.faster_executions or None,
        **others,
    )


def _entries(
    analysis: Analysis, exposed: dict[tuple[str, str, str], float]
) -> list[tuple[OpEntry, str]]:
    """One entry per scored op (``Score.ops``) with its module key, keyed in program order,
    heaviest first."""
    records = analysis.score.ops

    def program_order(index: int) -> tuple[int, int]:
        position = records[index].position
        return (_NO_POSITION if position is None else position, index)

    order = sorted(range(len(records)), key=program_order)
    stable_keys = keys.assign_keys(
        (
            records[i].module,
            records[i].op_path,
            records[i].opcode or "unknown",
            records[i].name,
        )
        for i in order
    )
    key_of = dict(zip(order, stable_keys, strict=True))
    matmul_tables: dict[str, dict[str, Any]] = {}
    kernels_of = op_kernels(analysis.profile.kernels)
    gpu = analysis.profile.kernels is not None
    entries = []
    for index, record in enumerate(records):
        module_key, name = record.module_key or "", record.name
        if module_key not in matmul_tables:
            matmul_tables[module_key] = matmuls_by_name(analysis.shardings.get(module_key))
        matmul = matmul_tables[module_key].get(name)
        sharding = analysis.shardings.get(module_key)
        entry = _entry(
            record,
            key=key_of[index],
            global_shapes=(
                matmul_global_shapes(matmul)
                if matmul is not None
                else _global_shape(sharding, name)
            ),
            splits=matmul_splits(matmul) if matmul is not None else None,
            exposed_s=exposed.get((record.module, module_key, name)),
            program=record.module_key,
            kernels=kernels_of.get((record.module, module_key, name), []) if gpu else None,
        )
        entries.append((entry, module_key))
    _label(entries)
    entries.sort(key=lambda pair: -pair[0].measured_s)
    return entries


def _label(entries: list[tuple[OpEntry, str]]) -> None:
    """Each op's name as the report shows it: the bare HLO name where it is unique; else with
    its program, ``jit_dot/custom-call.1``; else, where several programs share a module name
    too, with the program's key, ``jit_matmul(19)/custom-call.1``."""
    names = Counter(entry.name for entry, _ in entries)
    in_module = Counter((entry.module, entry.name) for entry, _ in entries)
    for entry, module_key in entries:
        if names[entry.name] == 1:
            entry.label = entry.name
        elif in_module[(entry.module, entry.name)] == 1 or not module_key:
            entry.label = f"{entry.module}/{entry.name}"
        else:
            entry.label = f"{module_key}/{entry.name}"


def _scorer_figures(score: Score) -> dict[str, Scalar]:
    """The scorer's scalar summary figures (copied into the JSON as ``score_<name>``)."""
    figures = score.summary.to_dict()
    return {k: v for k, v in figures.items() if isinstance(v, int | float | str | bool)}


def _rule_contexts(profile: Profile, entries: list[tuple[OpEntry, str]]) -> list[rules.OpContext]:
    """Each entry with its instruction and module, for the rules."""
    contexts = []
    for entry, module_key in entries:
        module = profile.modules.get(module_key) if module_key else None
        instruction = profile.instruction(module_key, entry.name) if module is not None else None
        contexts.append(rules.OpContext(entry, instruction, module))
    return contexts


def _unmatched_time(profile: Profile) -> float:
    """Seconds of the op events joined to no HLO instruction (all devices)."""
    ops = profile.ops
    if not len(ops):
        return 0.0
    return float(ops.loc[~ops["matched"].astype(bool), "duration_s"].sum())


def _with_instructions(
    profile: Profile, entries: list[tuple[OpEntry, str]]
) -> list[tuple[OpEntry, Instruction | None, Module | None]]:
    """Each entry with its instruction and module (None where it has no HLO)."""
    out = []
    for entry, module_key in entries:
        module = profile.modules.get(module_key) if module_key else None
        instruction = profile.instruction(module_key, entry.name) if module is not None else None
        out.append((entry, instruction, module))
    return out


# Findings that need no HLO: they read the measured times alone.
_WITHOUT_HLO_RULES = frozenset({"idle-gaps", "straggler-host"})


def hlo_missing(profile: Profile) -> str | None:
    """One line saying the profile's ops were joined to no HLO and what to pass, or None."""
    if profile.modules or not len(profile.ops):
        return None
    return (
        "no HLO: the trace holds none (a trace-viewer JSON keeps only op names); pass --hlo DIR "
        "(XLA's dump, XLA_FLAGS=--xla_dump_to) or report the run's .xplane.pb; measured times "
        "only: no MFU, roofline figures or findings that need the HLO"
    )


def build_report(
    analysis: Analysis, config: RuleConfig | None = None, *, with_rules: bool = True
) -> Report:
    """The report of one profile: per-op table, summary, findings of the rules."""
    config = config or RuleConfig()
    profile, score = analysis.profile, analysis.score
    facts = summary.overlap(profile.ops, score.ops, profile.op_groups())
    keyed = _entries(analysis, facts.exposed_by_op)
    entries = [entry for entry, _ in keyed]
    steps = summary.steps(profile.steps, score.steps)
    report_summary = summary.summarise(
        ops=entries,
        steps=steps,
        facts=facts,
        busy=summary.BusyTime(
            span_s=float(score.summary.busy_span_s),
            idle_s=float(score.summary.idle_s),
            by_category_s=dict(score.summary.time_by_category_s),
            by_bound_s=dict(score.summary.time_by_bound_s),
        ),
        total_event_time_s=float(profile.ops["duration_s"].sum()) if len(profile.ops) else 0.0,
        unmatched_event_time_s=_unmatched_time(profile),
        device_count=int(profile.device.count or 1),
        scorer=_scorer_figures(score),
    )
    report_summary.mesh = {
        str(key): dict(sharding.mesh.shape)
        for key, sharding in analysis.shardings.items()
        if sharding.mesh.shape
    }
    report = Report(
        device=_device(profile.device),
        chip=chip_section(score.chip),
        steps=steps,
        summary=report_summary,
        ops=entries,
        findings=[],
        unmatched=[
            UnmatchedGroup(u.reason, int(u.count), list(u.examples)[:5]) for u in profile.unmatched
        ],
        # the readers' words on where the measured side came from (device clock, joins, HLO)
        trace=Trace(path=str(profile.path), run=profile.run, notes=distinct(profile.notes)),
    )
    # per-device figures are of the devices the trace holds
    report.trace.devices_partial = partial_devices_note(report.device.count, report_summary.mesh)
    missing = hlo_missing(profile)
    report.trace.hlo_missing = missing
    if missing is not None:
        report.summary.mfu = None  # no FLOPs were counted: 0% would be a figure, not a fact
    report.memory = memory_section(profile, score.chip)
    report.gemms = [row.entry() for row in gemm_rows(_with_instructions(profile, keyed))]
    report.hosts, report.cross_host = hosts_section(profile)
    if with_rules:
        findings = rules.run_rules(report, _rule_contexts(profile, keyed), config)
        findings = ranked(findings + straggler_findings(report))  # by saving (savings.py)
        if missing is not None:
            findings = [f for f in findings if f.rule in _WITHOUT_HLO_RULES]
        report.findings = findings
        report.rules = rules.rule_table(config)
        by_key = {entry.key: entry for entry in entries}
        for finding in findings:
            entry = by_key.get(finding.op or "")
            if entry is not None and finding.rule not in entry.flags:
                entry.flags.append(finding.rule)
        report.summary.findings = len(findings)
    return report
