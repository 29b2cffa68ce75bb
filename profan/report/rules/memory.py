"""The memory rules: a program's peak near the chip's capacity (``near-capacity``), one
temporary holding a large share of it (``large-temporary``), an input replaced by its new value
but not donated (``undonated-input``).  They read ``Report.memory``
(``profan.report.analysis.memory``); each registers itself in ``catalogue.RULES`` when this
module is imported (the report's build does).
"""

from __future__ import annotations

from profan.memory.render import size
from profan.report.format import percent
from profan.report.model import Finding, MemoryBuffer, MemoryEntry, Report
from profan.report.rules.catalogue import OpContext, rule
from profan.report.rules.config import RuleConfig
from profan.report.rules.savings import MEMORY_FLOORS


def device_entries(report: Report) -> list[MemoryEntry]:
    """The programs' entries in the device's main memory (HBM; RAM on CPU)."""
    return [e for e in report.memory if e.memory_space == "device"]


def largest_buffer(entry: MemoryEntry) -> MemoryBuffer | None:
    return entry.top_buffers[0] if entry.top_buffers else None


@rule(
    "near-capacity",
    "a program's memory peak above a share of the chip's memory per device",
    ("memory_near_capacity_above",),
    floors=("memory_near_capacity_above",),  # a risk, not a saving: its threshold is its floor
)
def near_capacity(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    limit = config.memory_near_capacity_above
    findings = []
    for entry in device_entries(report):
        hbm = entry.hbm_bytes
        if not hbm or entry.peak_bytes <= limit * hbm:
            continue
        largest = largest_buffer(entry)
        findings.append(
            Finding(
                "near-capacity",
                f"{entry.module} peaks at {size(entry.peak_bytes)}, "
                f"{percent(entry.peak_bytes / hbm)} of the {size(hbm)} per device "
                f"(headroom {size(entry.headroom_bytes)})",
                "the largest buffers live at the peak (profan memory); donate inputs, shard or "
                "rematerialise the largest activations",
                module=entry.module,
                name=None if largest is None else largest.name,
                source=None if largest is None else largest.source,
                saving_bytes=float(entry.peak_bytes - limit * hbm),
                saving_from=f"the peak's bytes above {percent(limit)} of the chip's memory",
            )
        )
    return findings


@rule(
    "large-temporary",
    "one temporary buffer holding a large share of a program's peak",
    ("memory_large_temporary_share_above",),
    floors=MEMORY_FLOORS,
)
def large_temporary(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    share = config.memory_large_temporary_share_above
    findings = []
    for entry in device_entries(report):
        peak = entry.peak_bytes
        if not peak or entry.source != "buffer-assignment":
            continue
        for buffer in entry.top_buffers:
            if buffer.kind != "temporary" or buffer.size_bytes <= share * peak:
                continue
            findings.append(
                Finding(
                    "large-temporary",
                    f"{buffer.name} ({buffer.shape}) holds {size(buffer.size_bytes)}, "
                    f"{percent(buffer.size_bytes / peak)} of {entry.module}'s peak",
                    "the line that makes this temporary: fuse, chunk or rematerialise it",
                    module=entry.module,
                    name=buffer.name,
                    source=buffer.source,
                    saving_bytes=float(buffer.size_bytes),
                    saving_from="the temporary's bytes per device, were it chunked away",
                )
            )
    return findings


@rule(
    "undonated-input",
    "an input the program replaces with a new value (state in, new state out), not donated",
    floors=MEMORY_FLOORS,
)
def undonated_input(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    findings = []
    for entry in device_entries(report):
        for item in entry.undonated:
            what = item.parameter_path or item.parameter
            findings.append(
                Finding(
                    "undonated-input",
                    f"{entry.module}: input {what} ({item.shape}) is replaced by its new "
                    f"value {item.output} but is not donated, so both exist at the end of "
                    f"the step; donating it would save {size(item.size_bytes)}",
                    "jax.jit(..., donate_argnums=...) for this argument, if the caller does not "
                    "use it after the call (its buffer is then reused for the new value)",
                    module=entry.module,
                    name=item.parameter,
                    source=item.output_source,
                    saving_bytes=float(item.size_bytes),
                    saving_from="the input's bytes per device, reused for its new value",
                )
            )
    return findings
