"""The memory section rendered: per program its peak against the chip, its totals and the
largest buffers live at the peak, for the terminal, Markdown and the HTML page (the heap over
program order drawn).  Reads ``Report.memory`` (``profan.report.analysis.memory``)."""

from __future__ import annotations

import html as html_lib
import os
import textwrap

from profan.escape import markdown_code, markdown_text
from profan.memory.render import buffers_svg, size, timeline_svg
from profan.report.format import percent
from profan.report.model import MemoryEntry, Report
from profan.report.rules.memory import device_entries


def _headline(entry: MemoryEntry) -> str:
    text = f"peak {size(entry.peak_bytes)}"
    if entry.hbm_bytes:
        share = entry.peak_bytes / entry.hbm_bytes
        text += (
            f" = {percent(share)} of {size(entry.hbm_bytes)} ({entry.chip}), "
            f"headroom {size(entry.headroom_bytes)}"
        )
    if entry.peak_instruction:
        text += f", at {entry.peak_instruction}"
    return text


def _totals(entry: MemoryEntry) -> str:
    return (
        f"arguments {size(entry.argument_bytes)}, outputs {size(entry.output_bytes)}, "
        f"donated {size(entry.alias_bytes)}, temporaries {size(entry.temp_bytes)}"
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
        space = "" if entry.memory_space == "device" else f" [{entry.memory_space}]"
        lines += _wrapped(f"{entry.module}{space}: {_headline(entry)}", width, 2)
        lines += _wrapped(_totals(entry), width, 4)
        for b in entry.top_buffers[:top]:
            text = f"{size(b.size_bytes)} {b.kind} {b.shape} {b.name}"
            where = _short_source(b.source)
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
        share = e.peak_bytes / e.hbm_bytes if e.hbm_bytes else None
        lines.append(
            f"| {markdown_code(e.module)} | {e.memory_space} | {size(e.peak_bytes)} | "
            f"{percent(share)} | {size(e.headroom_bytes)} | {size(e.argument_bytes)} | "
            f"{size(e.output_bytes)} | {size(e.alias_bytes)} | {size(e.temp_bytes)} | "
            f"{markdown_text(e.peak_instruction or '-')} |"
        )
    for e in device_entries(report)[:3]:
        if not e.top_buffers:
            continue
        lines += ["", f"Largest buffers live at the peak of {markdown_code(e.module)}:", ""]
        lines += ["| size | kind | shape | instruction | source |", "|---:|---|---|---|---|"]
        for b in e.top_buffers[:top]:
            lines.append(
                f"| {size(b.size_bytes)} | {b.kind} | {_cell(b.shape)} | "
                f"{markdown_code(b.name)} | {markdown_text(b.source or '-')} |"
            )
    return [*lines, ""]


def html_section(report: Report, top: int = 10) -> str:
    """Per device program: headline, the heap over program order, the largest buffers."""
    if not report.memory:
        return ""
    e = html_lib.escape
    parts = ["<h2>Memory (per device)</h2>"]
    drawn = device_entries(report)[:5]
    for entry in drawn:
        points = [value for _, value in entry.timeline]
        positions = [position for position, _ in entry.timeline]
        peak_index = (
            positions.index(entry.peak_position) if entry.peak_position in positions else None
        )
        bars = [(b.name, b.size_bytes, b.kind, b.shape) for b in entry.top_buffers[:top]]
        parts.append(
            f"<div class='memory-program' data-module='{e(entry.module)}'>"
            f"<h3><code>{e(entry.module)}</code></h3><p>{e(_headline(entry))}<br>"
            f"{e(_totals(entry))}</p>"
            f"{timeline_svg(points, peak_index, entry.peak_bytes)}{buffers_svg(bars)}</div>"
        )
    others = [x for x in report.memory if x.memory_space != "device" or x not in drawn]
    if others:
        parts.append("<ul>")
        parts += [
            f"<li><code>{e(x.module)}</code> [{e(x.memory_space)}]: {e(_headline(x))}</li>"
            for x in others
        ]
        parts.append("</ul>")
    return "\n".join(parts)
