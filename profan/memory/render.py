"""``MemoryReport`` as text (terminal, Markdown), self-contained HTML (inline SVG) or JSON."""

from __future__ import annotations

import html
import json
from collections.abc import Callable

from profan.escape import escaped, markdown_code
from profan.memory.model import MemoryReport, ProgramMemory
from profan.units import percent, si

TOP = 10
_EXPLAIN_ESTIMATE = (
    "source 'estimate': liveness over the module's printed order; arguments, outputs and "
    "donation are exact, temporaries are an estimate (no fragmentation, no in-place sharing)"
)


def size(value: float | None) -> str:
    return si(value, "B")


def _headline(program: ProgramMemory) -> list[tuple[str, str]]:
    """(label, value) pairs shown for every program."""
    rows = [
        ("arguments", size(program.argument_bytes)),
        ("outputs", size(program.output_bytes)),
        ("donated (aliased)", size(program.alias_bytes)),
        (
            "temporaries (estimated peak)"
            if program.source == "estimate"
            else "temporaries (allocated)",
            size(program.temp_bytes),
        ),
    ]
    if program.constant_bytes:
        rows.append(("constants", size(program.constant_bytes)))
    if program.fragmentation_bytes:
        rows.append(("fragmentation", size(program.fragmentation_bytes)))
    where = ""
    if program.peak_instruction:
        where = f" at {program.peak_instruction}"
        if program.peak_position is not None:
            where += f" (step {program.peak_position} of {len(program.timeline)})"
    rows.append(("peak", size(program.peak_bytes) + where))
    if program.hbm_bytes:
        rows.append(
            (
                f"vs {program.chip} memory",
                f"{percent(program.peak_share_of_hbm)} of {size(program.hbm_bytes)}, "
                f"headroom {size(program.headroom_bytes)}",
            )
        )
    b = program.breakdown
    if b is not None and (b.parameters_bytes or b.optimizer_state_bytes):
        rows.append(
            (
                "breakdown",
                f"parameters {size(b.parameters_bytes)}, optimizer state "
                f"{size(b.optimizer_state_bytes)}, inputs {size(b.inputs_bytes)}, outputs "
                f"{size(b.outputs_bytes)}, temporaries at peak "
                f"{size(b.temporaries_at_peak_bytes)}",
            )
        )
    return rows


_BUFFER_COLUMNS = ("size", "kind", "shape", "instruction", "source")


def _buffer_rows(program: ProgramMemory, top: int) -> list[tuple[str, ...]]:
    return [
        (
            size(b.size_bytes),
            b.kind,
            b.shape,
            b.name,
            b.source or "-",
        )
        for b in program.top_buffers(top)
    ]


def _title(program: ProgramMemory) -> str:
    return f"{program.module} [{program.memory_space} memory, {program.source}]"


def terminal(report: MemoryReport, top: int = TOP) -> str:
    report = escaped(report)  # names from the trace are data: no control character passes
    lines = [f"memory: {report.path}"]
    if report.chip:
        approx = " (approximate figure)" if report.chip_approximate else ""
        lines.append(f"chip {report.chip}: {size(report.hbm_bytes)} per device{approx}")
    for program in report.programs:
        lines.append("")
        lines.append(_title(program))
        width = max(len(label) for label, _ in _headline(program))
        lines.extend(f"  {label:<{width}}  {value}" for label, value in _headline(program))
        rows = _buffer_rows(program, top)
        if rows:
            lines.append(f"  live at the peak ({len(program.live_at_peak)} buffers), largest:")
            widths = [
                max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(_BUFFER_COLUMNS)
            ]
            widths[2] = min(widths[2], 40)
            header = "  ".join(c.ljust(w) for c, w in zip(_BUFFER_COLUMNS, widths, strict=True))
            lines.append("    " + header.rstrip())
            for row in rows:
                cells = [
                    cell if len(cell) <= w else cell[: w - 1] + "…"
                    for cell, w in zip(row, widths, strict=True)
                ]
                lines.append(
                    "    "
                    + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
                )
        lines.extend(f"  note: {note}" for note in program.notes)
    if any(p.source == "estimate" for p in report.programs):
        lines.append("")
        lines.append(_EXPLAIN_ESTIMATE)
    lines.extend(f"note: {note}" for note in report.notes)
    return "\n".join(lines) + "\n"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")  # (a name in a cell is no tag)


def markdown(report: MemoryReport, top: int = TOP) -> str:
    report = escaped(report)  # names from the trace are data: no control character passes
    lines = [f"# Memory: {markdown_code(report.path)}", ""]
    if report.chip:
        lines.append(f"Chip **{report.chip}**: {size(report.hbm_bytes)} per device.")
        lines.append("")
    for program in report.programs:
        lines.append(
            f"## {markdown_code(program.module)} — {program.memory_space} memory ({program.source})"
        )
        lines.append("")
        lines.append("| | |")
        lines.append("|---|---|")
        lines.extend(f"| {label} | {_md_escape(value)} |" for label, value in _headline(program))
        rows = _buffer_rows(program, top)
        if rows:
            lines.append("")
            lines.append(f"Live at the peak ({len(program.live_at_peak)} buffers), largest:")
            lines.append("")
            lines.append("| " + " | ".join(_BUFFER_COLUMNS) + " |")
            lines.append("|---:|---|---|---|---|")
            for row in rows:
                lines.append("| " + " | ".join(_md_escape(c) for c in row) + " |")
        lines.extend(f"\n> {note}" for note in program.notes)
        lines.append("")
    if any(p.source == "estimate" for p in report.programs):
        lines.append(f"_{_EXPLAIN_ESTIMATE}_")
    lines.extend(f"> {note}" for note in report.notes)
    return "\n".join(lines) + "\n"


def timeline_svg(
    points: list[int],
    peak_position: int | None,
    peak_bytes: int,
    width: int = 640,
    height: int = 200,
) -> str:
    """The heap over program order (as XProf's memory viewer draws it), peak marked, with a
    size axis, a program-order axis and a legend."""
    if len(points) < 2:
        return ""
    left, right, top_margin, bottom = 64, 10, 22, 34
    plot_w, plot_h = width - left - right, height - top_margin - bottom
    top = max(points) or 1
    step = plot_w / (len(points) - 1)

    def y_of(value: float) -> float:
        return top_margin + plot_h - value / top * plot_h

    path = " ".join(f"{left + i * step:.1f},{y_of(value):.1f}" for i, value in enumerate(points))
    axes = [
        f'<line x1="{left}" y1="{top_margin}" x2="{left}" y2="{top_margin + plot_h}" '
        'stroke="#555"/>',
        f'<line x1="{left}" y1="{top_margin + plot_h}" x2="{width - right}" '
        f'y2="{top_margin + plot_h}" stroke="#555"/>',
    ]
    for fraction in (0.0, 0.5, 1.0):  # size ticks: none, half and all of the largest heap
        y = y_of(top * fraction)
        axes.append(
            f'<line x1="{left - 4}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" '
            f'stroke="#ddd"/><text x="{left - 6}" y="{y + 4:.1f}" font-size="10" '
            f'text-anchor="end">{html.escape(size(top * fraction))}</text>'
        )
    last = len(points) - 1
    for position in sorted({0, last // 2, last}):
        x = left + position * step
        axes.append(
            f'<text x="{x:.1f}" y="{top_margin + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{position}</text>'
        )
    axes.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 4}" font-size="11" '
        'text-anchor="middle">program order (heap event)</text>'
    )
    legend = (
        f'<line x1="{left}" y1="10" x2="{left + 18}" y2="10" stroke="#1976d2" '
        f'stroke-width="1.5"/><text x="{left + 22}" y="14" font-size="11">heap in use</text>'
    )
    marker = ""
    if peak_position is not None:
        x = left + peak_position * step
        marker = (
            f'<line x1="{x:.1f}" y1="{top_margin}" x2="{x:.1f}" y2="{top_margin + plot_h}" '
            'stroke="#d32f2f" stroke-dasharray="4 3"/>'
        )
        legend += (
            f'<line x1="{left + 110}" y1="10" x2="{left + 128}" y2="10" stroke="#d32f2f" '
            f'stroke-dasharray="4 3"/><text x="{left + 132}" y="14" font-size="11" '
            f'fill="#d32f2f">peak {html.escape(size(peak_bytes))} at event {peak_position}'
            "</text>"
        )
    return (
        f'<svg class="memory-timeline" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="heap over program order">'
        + "".join(axes)
        + f'<polyline fill="none" stroke="#1976d2" stroke-width="1.5" points="{path}"/>'
        f"{marker}{legend}</svg>"
    )


_KIND_COLOURS = {
    "parameter": "#7b1fa2",
    "parameter aliased to output": "#388e3c",
    "output": "#f57c00",
    "temporary": "#1976d2",
    "constant": "#616161",
    "thread-local": "#9e9e9e",
}


def buffers_svg(buffers: list[tuple[str, int, str, str]], width: int = 640) -> str:
    """A bar chart of buffers ``(name, bytes, kind, shape)``, coloured by kind, with a legend
    of the kinds shown and a size axis."""
    if not buffers:
        return ""
    bar, gap, label_width, legend_h = 16, 4, 260, 22
    rows_h = len(buffers) * (bar + gap)
    height = legend_h + rows_h + 20
    largest = max(b[1] for b in buffers) or 1
    span = width - label_width - 70
    parts = []
    x = 0
    for kind in dict.fromkeys(b[2] for b in buffers):  # the legend: the kinds shown, in order
        colour = _KIND_COLOURS.get(kind, "#1976d2")
        parts.append(
            f'<rect x="{x}" y="4" width="12" height="12" fill="{colour}"/>'
            f'<text x="{x + 16}" y="14" font-size="11">{html.escape(kind)}</text>'
        )
        x += 24 + 7 * len(kind)
    for row, (name, nbytes, kind, shape) in enumerate(buffers):
        y = legend_h + row * (bar + gap)
        length = span * nbytes / largest
        colour = _KIND_COLOURS.get(kind, "#1976d2")
        label = html.escape(name if len(name) <= 38 else name[:37] + "…")
        parts.append(
            f'<text x="0" y="{y + 12}" font-size="11">{label}</text>'
            f'<rect x="{label_width}" y="{y}" width="{max(length, 1):.1f}" height="{bar}" '
            f'fill="{colour}"><title>{html.escape(kind)}: {html.escape(shape)}</title></rect>'
            f'<text x="{label_width + length + 4:.1f}" y="{y + 12}" font-size="11">'
            f"{html.escape(size(nbytes))}</text>"
        )
    axis_y = legend_h + rows_h
    parts.append(
        f'<line x1="{label_width}" y1="{axis_y}" x2="{label_width + span}" y2="{axis_y}" '
        f'stroke="#555"/><text x="{label_width}" y="{axis_y + 14}" font-size="10">0</text>'
        f'<text x="{label_width + span}" y="{axis_y + 14}" font-size="10" text-anchor="end">'
        f"{html.escape(size(largest))}</text>"
        f'<text x="{label_width + span / 2:.1f}" y="{axis_y + 14}" font-size="10" '
        'text-anchor="middle">buffer size</text>'
    )
    return (
        f'<svg class="memory-buffers" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="largest buffers at the peak">'
        + "".join(parts)
        + "</svg>"
    )


def program_html(program: ProgramMemory, top: int = TOP) -> str:
    """One program's section: headline table, timeline, top-buffer bars and table."""
    cells = "".join(
        f"<tr><th>{html.escape(label)}</th><td>{html.escape(value)}</td></tr>"
        for label, value in _headline(program)
    )
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
        for row in _buffer_rows(program, top)
    )
    head = "".join(f"<th>{c}</th>" for c in _BUFFER_COLUMNS)
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in program.notes)
    heap = [p.heap_bytes for p in program.timeline]
    bars = [(b.name, b.size_bytes, b.kind, b.shape) for b in program.top_buffers(top)]
    return (
        f"<section class='memory-program'><h2>{html.escape(_title(program))}</h2>"
        f"<table class='memory-headline'>{cells}</table>"
        f"{timeline_svg(heap, program.peak_position, program.peak_bytes)}{buffers_svg(bars)}"
        f"<table class='memory-buffers'><tr>{head}</tr>{rows}</table>{notes}</section>"
    )


def html_page(report: MemoryReport, top: int = TOP) -> str:
    body = "".join(program_html(p, top) for p in report.programs)
    notes = "".join(f"<p class='note'>{html.escape(n)}</p>" for n in report.notes)
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>profan memory: {html.escape(report.path)}</title>"
        "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse;"
        "margin:.5em 0}td,th{padding:2px 8px;text-align:left;border-bottom:1px solid #ddd}"
        ".note{color:#555}</style></head><body>"
        f"<h1>Memory: {html.escape(report.path)}</h1>{body}{notes}</body></html>\n"
    )


def json_text(report: MemoryReport, top: int = TOP) -> str:
    return json.dumps(report.to_dict(top), indent=1) + "\n"


RENDERERS: dict[str, Callable[[MemoryReport, int], str]] = {
    "term": terminal,
    "md": markdown,
    "html": html_page,
    "json": json_text,
}
