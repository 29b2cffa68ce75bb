"""The report's memory section: every program that ran, its peak against the chip, what is live
there; the memory rules (near-capacity, large-temporary, undonated-input), budgets and diff.

The section is plain data on ``Report.memory`` (one dict per program and memory space, the JSON
``memory`` list, see SCHEMA.md); the figures come from ``profan.memory`` (the compiler's buffer
assignment each trace embeds).
"""

from __future__ import annotations

import html as html_lib
import os
import textwrap
from typing import Any

from profan.chips import Chip
from profan.escape import markdown_code, markdown_text
from profan.memory.analyze import analyze_profile
from profan.memory.render import buffers_svg, size, timeline_svg
from profan.report.format import percent
from profan.report.model import Finding, Report
from profan.report.rules.catalogue import OpContext, rule
from profan.report.rules.config import RuleConfig
from profan.report.rules.savings import MEMORY_FLOORS
from profan.trace.profile import Profile

TOP_BUFFERS = 10
TIMELINE_POINTS = 200


def _timeline(points: list[int], peak_position: int | None) -> list[list[int]]:
    """At most TIMELINE_POINTS [position, heap bytes] pairs, always keeping the peak."""
    if not points:
        return []
    stride = max(1, -(-len(points) // TIMELINE_POINTS))
    keep = set(range(0, len(points), stride)) | {len(points) - 1}
    if peak_position is not None:
        keep.add(peak_position)
    return [[i, points[i]] for i in sorted(keep)]


def memory_section(profile: Profile, chip: Chip | None) -> list[dict[str, Any]]:
    """One JSON-ready entry per program that ran and memory space, largest device peak first."""
    entries = []
    for program in analyze_profile(profile, chip).programs:
        entry = program.to_dict(TOP_BUFFERS)
        entry["timeline"] = _timeline(
            [p.heap_bytes for p in program.timeline], program.peak_position
        )
        entries.append(entry)
    return entries


def _device(report: Report) -> list[dict[str, Any]]:
    return [e for e in report.memory if e.get("memory_space") == "device"]


# ------------------------------------------------------------------------------ rendering


def _headline(entry: dict[str, Any]) -> str:
    text = f"peak {size(entry['peak_bytes'])}"
    if entry.get("hbm_bytes"):
        share = entry["peak_bytes"] / entry["hbm_bytes"]
        text += (
            f" = {percent(share)} of {size(entry['hbm_bytes'])} ({entry.get('chip')}), "
            f"headroom {size(entry['headroom_bytes'])}"
        )
    if entry.get("peak_instruction"):
        text += f", at {entry['peak_instruction']}"
    return text


def _totals(entry: dict[str, Any]) -> str:
    return (
        f"arguments {size(entry['argument_bytes'])}, outputs {size(entry['output_bytes'])}, "
        f"donated {size(entry['alias_bytes'])}, temporaries {size(entry['temp_bytes'])}"
    )


def _short_source(source: str | None) -> str:
    if not source:
        return ""
    cwd = os.getcwd() + os.sep
    return source[len(cwd) :] if source.startswith(cwd) else source


def _wrapped(text: str, width: int, indent: int) -> list[str]:
    """``text`` in lines of at most ``width`` columns, continuation lines indented 2 more."""
    return textwrap.wrap(
        text,
        width=max(width, indent + 20),
        initial_indent=" " * indent,
        subsequent_indent=" " * (indent + 2),
        break_on_hyphens=False,
    )


def terminal_lines(report: Report, width: int = 100, top: int = 3) -> list[str]:
    """The section for ``profan report`` in a terminal (empty when the trace had none); no line
    is wider than ``width``."""
    entries = report.memory
    if not entries:
        return []
    lines = _wrapped("Memory (per device; the compiler's buffer assignment)", width, 0)
    for entry in entries:
        space = "" if entry["memory_space"] == "device" else f" [{entry['memory_space']}]"
        lines += _wrapped(f"{entry['module']}{space}: {_headline(entry)}", width, 2)
        lines += _wrapped(_totals(entry), width, 4)
        for b in entry["top_buffers"][:top]:
            text = f"{size(b['size_bytes'])} {b['kind']} {b['shape']} {b['name']}"
            where = _short_source(b.get("source"))
            lines += _wrapped(f"{text} {where}".rstrip(), width, 4)
    return [*lines, ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_lines(report: Report, top: int = 5) -> list[str]:
    if not report.memory:
        return []
    lines = [
        "## Memory (per device)",
        "",
        "| program | space | peak | of HBM | headroom | arguments | outputs | donated | "
        "temporaries | peak at |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for e in report.memory:
        share = e["peak_bytes"] / e["hbm_bytes"] if e.get("hbm_bytes") else None
        lines.append(
            f"| {markdown_code(e['module'])} | {e['memory_space']} | {size(e['peak_bytes'])} | "
            f"{percent(share)} | {size(e.get('headroom_bytes'))} | {size(e['argument_bytes'])} | "
            f"{size(e['output_bytes'])} | {size(e['alias_bytes'])} | {size(e['temp_bytes'])} | "
            f"{markdown_text(e.get('peak_instruction') or '-')} |"
        )
    for e in _device(report)[:3]:
        if not e["top_buffers"]:
            continue
        lines += ["", f"Largest buffers live at the peak of {markdown_code(e['module'])}:", ""]
        lines += ["| size | kind | shape | instruction | source |", "|---:|---|---|---|---|"]
        for b in e["top_buffers"][:top]:
            lines.append(
                f"| {size(b['size_bytes'])} | {b['kind']} | {_cell(b['shape'])} | "
                f"{markdown_code(b['name'])} | {markdown_text(b.get('source') or '-')} |"
            )
    return [*lines, ""]


def html_section(report: Report, top: int = 10) -> str:
    """Per device program: headline, the heap over program order, the largest buffers."""
    if not report.memory:
        return ""
    e = html_lib.escape
    parts = ["<h2>Memory (per device)</h2>"]
    for entry in _device(report)[:5]:
        points = [value for _, value in entry.get("timeline", [])]
        positions = [position for position, _ in entry.get("timeline", [])]
        peak_index = (
            positions.index(entry["peak_position"])
            if entry.get("peak_position") in positions
            else None
        )
        bars = [
            (b["name"], b["size_bytes"], b["kind"], b["shape"]) for b in entry["top_buffers"][:top]
        ]
        parts.append(
            f"<div class='memory-program' data-module='{e(entry['module'])}'>"
            f"<h3><code>{e(entry['module'])}</code></h3><p>{e(_headline(entry))}<br>"
            f"{e(_totals(entry))}</p>"
            f"{timeline_svg(points, peak_index, entry['peak_bytes'])}{buffers_svg(bars)}</div>"
        )
    others = [
        x
        for x in report.memory
        if x.get("memory_space") != "device" or x not in _device(report)[:5]
    ]
    if others:
        parts.append("<ul>")
        parts += [
            f"<li><code>{e(x['module'])}</code> [{e(x['memory_space'])}]: {e(_headline(x))}</li>"
            for x in others
        ]
        parts.append("</ul>")
    return "\n".join(parts)


# ------------------------------------------------------------------------------ rules


@rule(
    "near-capacity",
    "a program's memory peak above a share of the chip's memory per device",
    ("memory_near_capacity_above",),
    floors=("memory_near_capacity_above",),  # a risk, not a saving: its threshold is its floor
)
def near_capacity(report: Report, ops: list[OpContext], config: RuleConfig) -> list[Finding]:
    limit = config.memory_near_capacity_above
    findings = []
    for entry in _device(report):
        hbm = entry.get("hbm_bytes")
        if not hbm or entry["peak_bytes"] <= limit * hbm:
            continue
        largest = entry["top_buffers"][0] if entry["top_buffers"] else {}
        findings.append(
            Finding(
                "near-capacity",
                f"{entry['module']} peaks at {size(entry['peak_bytes'])}, "
                f"{percent(entry['peak_bytes'] / hbm)} of the {size(hbm)} per device "
                f"(headroom {size(entry['headroom_bytes'])})",
                "the largest buffers live at the peak (profan memory); donate inputs, shard or "
                "rematerialise the largest activations",
                module=entry["module"],
                name=largest.get("name"),
                source=largest.get("source"),
                saving_bytes=float(entry["peak_bytes"] - limit * hbm),
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
    for entry in _device(report):
        peak = entry["peak_bytes"]
        if not peak or entry.get("source") != "buffer-assignment":
            continue
        for buffer in entry["top_buffers"]:
            if buffer["kind"] != "temporary" or buffer["size_bytes"] <= share * peak:
                continue
            findings.append(
                Finding(
                    "large-temporary",
                    f"{buffer['name']} ({buffer['shape']}) holds {size(buffer['size_bytes'])}, "
                    f"{percent(buffer['size_bytes'] / peak)} of {entry['module']}'s peak",
                    "the line that makes this temporary: fuse, chunk or rematerialise it",
                    module=entry["module"],
                    name=buffer["name"],
                    source=buffer.get("source"),
                    saving_bytes=float(buffer["size_bytes"]),
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
    for entry in _device(report):
        for item in entry.get("undonated", []):
            what = item["parameter_path"] or item["parameter"]
            findings.append(
                Finding(
                    "undonated-input",
                    f"{entry['module']}: input {what} ({item['shape']}) is replaced by its new "
                    f"value {item['output']} but is not donated, so both exist at the end of "
                    f"the step; donating it would save {size(item['size_bytes'])}",
                    "jax.jit(..., donate_argnums=...) for this argument, if the caller does not "
                    "use it after the call (its buffer is then reused for the new value)",
                    module=entry["module"],
                    name=item["parameter"],
                    source=item.get("output_source"),
                    saving_bytes=float(item["size_bytes"]),
                    saving_from="the input's bytes per device, reused for its new value",
                )
            )
    return findings


# ------------------------------------------------------------------------------ diff


def _identity(buffer: dict[str, Any]) -> tuple[str, str, str]:
    return buffer["kind"], buffer["shape"], buffer.get("source") or buffer["name"]


def diff_lines(a: Report, b: Report) -> list[str]:
    """Peak changes of the programs in both reports, and the buffers that appeared at B's peak."""
    if not a.memory and not b.memory:
        return []

    def key(entry: dict[str, Any]) -> tuple[str, str]:
        return entry["module"].split("(")[0], entry["memory_space"]

    before = {key(e): e for e in a.memory}
    lines = ["", "Memory peaks per device (programs in both, by name):"]
    for entry in b.memory:
        old = before.get(key(entry))
        if old is None:
            lines.append(f"  new in B: {entry['module']} peak {size(entry['peak_bytes'])}")
            continue
        change = entry["peak_bytes"] - old["peak_bytes"]
        ratio = f" ({change / old['peak_bytes']:+.1%})" if old["peak_bytes"] else ""
        lines.append(
            f"  {entry['module'].split('(')[0]} [{entry['memory_space']}]: "
            f"{size(old['peak_bytes'])} -> {size(entry['peak_bytes'])}{ratio}"
        )
        # Matched by kind, shape and source line: instruction names change across recompiles.
        seen = {(x["kind"], x["shape"], x.get("source") or x["name"]) for x in old["top_buffers"]}
        for buffer in entry["top_buffers"]:
            if (
                buffer["kind"],
                buffer["shape"],
                buffer.get("source") or buffer["name"],
            ) not in seen:
                where = f"  {buffer['source']}" if buffer.get("source") else ""
                lines.append(
                    f"    appeared: {buffer['name']} {buffer['shape']} "
                    f"{size(buffer['size_bytes'])}{where}"
                )
    return lines


# ------------------------------------------------------------------------------ budgets


def memory_checks(
    report: Report, peak_hbm_bytes: float | None, hbm_headroom_min: float | None
) -> list[tuple[str, bool, str, str | None]]:
    """``[budget] peak_hbm_bytes`` / ``hbm_headroom_min`` as (name, passed, message, source)
    results for ``profan check``; a budget the report cannot answer fails and says why."""
    if peak_hbm_bytes is None and hbm_headroom_min is None:
        return []
    device = _device(report)
    if not device:
        return [
            (
                name,
                False,
                "the report has no memory figures (the trace embeds no buffer assignment)",
                None,
            )
            for name, value in (("peak_hbm", peak_hbm_bytes), ("hbm_headroom", hbm_headroom_min))
            if value is not None
        ]
    worst = max(device, key=lambda e: e["peak_bytes"])
    largest = worst["top_buffers"][0] if worst["top_buffers"] else {}
    source = largest.get("source")
    results = []
    if peak_hbm_bytes is not None:
        results.append(
            (
                "peak_hbm",
                worst["peak_bytes"] <= peak_hbm_bytes,
                f"memory peak {size(worst['peak_bytes'])} per device in {worst['module']} "
                f"(budget {size(peak_hbm_bytes)})",
                source,
            )
        )
    if hbm_headroom_min is not None:
        hbm = worst.get("hbm_bytes")
        if not hbm:
            results.append(
                ("hbm_headroom", False, "the chip's memory is unknown (pass --chip NAME)", None)
            )
        else:
            left = (hbm - worst["peak_bytes"]) / hbm
            results.append(
                (
                    "hbm_headroom",
                    left >= hbm_headroom_min,
                    f"{percent(left)} of the {size(hbm)} per device left free at "
                    f"{worst['module']}'s peak (budget at least {percent(hbm_headroom_min)})",
                    source,
                )
            )
    return results
