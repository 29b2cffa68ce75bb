"""The report as text for a terminal: ANSI colour and box tables on a TTY, plain when piped."""

from __future__ import annotations

import os
import sys
from typing import IO, Any

from profan.escape import escaped
from profan.report.analysis.gemms import GEMM_COLUMNS, gemm_cells
from profan.report.analysis.hosts import terminal_lines as hosts_terminal_lines
from profan.report.analysis.kernels import kernel_summary
from profan.report.analysis.notes import HEADING as NOTES_HEADING
from profan.report.analysis.notes import more_text, notes_shown
from profan.report.analysis.splits import split_text
from profan.report.format import (
    bytes_lines,
    comm_text,
    flops_lines,
    idle_text,
    mfu_text,
    percent,
    saving_text,
    seconds,
    si,
    sources_legend,
    step_share_text,
)
from profan.report.model import OpEntry, Report
from profan.report.render.layout import (
    DEFAULT_WIDTH,
    Column,
    Style,
    fit_columns,
    hidden_note,
    para,
    table,
    terminal_width,
    try_widths,
    use_colour,
)
from profan.report.render.memory import terminal_lines as memory_terminal_lines
from profan.report.render.outline import in_order
from profan.report.rules.catalogue import RULES
from profan.report.rules.savings import grouped_findings


def sharding_lines(op: OpEntry) -> list[str]:
    """Pieces of the sharding cell: the collective (``all-reduce ×4 over axis0``), and for a
    matmul its global operands with the mesh axes splitting each dim
    (``f32[64/axis0,128]``, ``× f32[256/axis1,128]``, ``-> f32[64/axis0,256/axis1]``) and the
    axes its output is a partial sum over; otherwise the global shapes."""
    lines = []
    if op.collective:
        text = f"{op.collective.get('kind')} ×{op.collective.get('group_size')}"
        if op.collective.get("axes"):
            text += " over " + ",".join(op.collective["axes"])
        lines.append(text)
    splits = op.splits
    if splits and all(isinstance(splits.get(k), dict) for k in ("lhs", "rhs", "out")):
        dtype = str(splits.get("dtype") or "")
        lines.append(split_text(splits["lhs"], dtype))
        lines.append("× " + split_text(splits["rhs"], dtype))
        lines.append("-> " + split_text(splits["out"], dtype))
        if splits.get("partial_sum_axes"):
            lines.append("partial sum over " + ",".join(splits["partial_sum_axes"]))
    else:
        lines.extend(op.global_shapes)
    return lines


def short_path(source: str | None) -> str:
    """A source path relative to the working directory when it lies below it."""
    if not source:
        return ""
    cwd = os.getcwd().rstrip("/") + "/"
    return source[len(cwd) :] if source.startswith(cwd) else source


def efficiency_text(value: float | None, style: Style) -> str:
    if value is None:
        return "-"
    colour = "red" if value < 0.1 else "yellow" if value < 0.5 else "green"
    return style(percent(value, 0), colour)


def _spanned_of(op: OpEntry) -> list[str]:
    """``of k`` where the trace's async line records k of the op's n transfers."""
    return [f"of {op.async_span_n}"] if op.async_span_n != op.occurrences else []


def measured_lines(op: OpEntry) -> list[str]:
    """The measured cell.  An async done's is its transfer's, not its wait's: the
    start-to-done spans summed (``span``), or ``no span`` where the trace records none (its
    exposed wait is the ``wait`` cell)."""
    if op.async_span_s is not None:
        return [f"span {seconds(op.async_span_s)}", *_spanned_of(op)]
    if op.exposed_wait_s is not None:
        return ["no span"]
    return [seconds(op.measured_s)]


def ideal_lines(op: OpEntry) -> list[str]:
    """The ideal cell: an async done with spans shows the ideal of the transfers its spans
    cover, so that measured, ideal and eff are one verdict."""
    if op.async_span_s is not None and op.async_span_ideal_s is not None:
        return [seconds(op.async_span_ideal_s), *_spanned_of(op)]
    return [seconds(op.roofline_s)]


def wait_lines(op: OpEntry) -> list[str]:
    """The wait cell: an async done's exposed wait over its n executions."""
    return [seconds(op.exposed_wait_s)] if op.exposed_wait_s is not None else []


def async_legend(ops: list[OpEntry]) -> str | None:
    """How the table words async dones (every renderer prints it where it has one)."""
    if not any(op.exposed_wait_s is not None for op in ops):
        return None
    return (
        "async dones are scored as transfers: measured = their start-to-done spans summed, "
        "ideal = the ideal of those transfers, eff = ideal / measured (of k: the trace's "
        "async line records k of the n transfers; no span: it records none, eff unknown); "
        "wait = the done's exposed wait over its n executions, the time % counts"
    )


KEY_COLUMNS = ("op", "category", "measured", "ideal", "bound", "eff")
# What needs the HLO: a report joined to none shows none of them (trace.hlo_missing).
ROOFLINE_COLUMNS = ("ideal", "bound", "eff", "FLOPs", "bytes")
# Dropped in this order while the table does not fit (after flags move under the op and the
# wrapping columns shrink): totals first, the source line last.
_DROP_ORDER = (("FLOPs", "bytes"), ("n",), ("%",), ("sharding",), ("source",))


def _op_columns() -> list[Column]:
    return [
        Column("op", wrap="name", cap=40, min_width=14),
        Column("category"),
        Column("n", right=True),
        Column("measured", right=True),
        Column("%", right=True),
        Column("ideal", right=True),
        Column("bound"),
        Column("eff", right=True),
        Column("wait", right=True),
        Column("FLOPs", right=True),
        Column("bytes", right=True),
        Column("sharding", wrap="words", cap=44, min_width=16),
        Column("source", wrap="path", cap=40, min_width=16),
        Column("flags", wrap="words", cap=72, min_width=20),
    ]


def op_table(
    report: Report, top: int, width: int, style: Style, op_total: float | None = None
) -> list[str]:
    """The top-ops table fitted to ``width``: flags go to a line under their op, wrapping
    columns shrink, then the lower-priority columns are dropped (see ``_DROP_ORDER``).
    ``op_total``: the time % is a share of (default: the listed ops' total)."""
    op_total = op_total or sum(op.measured_s for op in report.ops) or 1.0
    rows: list[dict[str, list[str]]] = []
    for op in report.ops[:top]:
        rows.append(
            {
                "op": [op.label],
                "category": [op.category],
                "n": [str(op.occurrences)],
                "measured": measured_lines(op),
                "%": [percent(op.measured_s / op_total, 0)],
                "ideal": ideal_lines(op),
                "bound": [op.bound_by],
                "eff": [efficiency_text(op.efficiency, style)],
                "wait": wait_lines(op),
                "FLOPs": flops_lines(op),
                "bytes": bytes_lines(op),
                "sharding": sharding_lines(op),
                "source": [short_path(op.source)] if op.source else [],
                "flags": [f + "," for f in op.flags[:-1]] + op.flags[-1:],
            }
        )
    sep = 3 if style.colour else 2
    columns = _op_columns()
    for optional in ("sharding", "wait"):
        if not any(row[optional] for row in rows):
            columns = [c for c in columns if c.header != optional]
    if report.trace.hlo_missing:  # joined to no HLO: no ideal, bound or cost
        columns = [c for c in columns if c.header not in ROOFLINE_COLUMNS]
    if not any(row["flags"] for row in rows):
        columns = [c for c in columns if c.header != "flags"]
    flags_below = False
    if try_widths(columns, rows, width, sep) is None and any(c.header == "flags" for c in columns):
        flags_below = True
        columns = [c for c in columns if c.header != "flags"]
    columns, widths = fit_columns(columns, rows, width, sep, _DROP_ORDER)
    lines: list[str] = []
    for index, row in enumerate(rows):
        cells = [[row[c.header] for c in columns]]
        body = table(columns, cells, widths, style)
        lines.extend(body if index == 0 else body[2:])
        if flags_below and row["flags"]:
            for line in para("flags: " + " ".join(row["flags"]), width, indent=2, hang=7):
                lines.append(style(line, "red"))
        if report.ops[index].note:
            for line in para(f"note: {report.ops[index].note}", width, indent=2, hang=6):
                lines.append(style(line, "dim"))
        kernels = report.ops[index].kernels
        if kernels:  # GPU: the op's heaviest kernel (JSON: all of them)
            lines.append(style(kernel_line(kernels, width), "dim"))
    if not rows:
        lines = table(columns, [], widths, style)
    hidden = [c.header for c in _op_columns() if c.header not in {x.header for x in columns}]
    hidden = [h for h in hidden if h != "flags" or not flags_below]
    if report.trace.hlo_missing:  # left out, not hidden for want of room
        hidden = [h for h in hidden if h not in ROOFLINE_COLUMNS]
    hidden = [h for h in hidden if any(row.get(h) for row in rows)]
    advice = "widen the terminal, set COLUMNS, or use --format md|html|json"
    lines.extend(hidden_note(hidden, width, style, advice))
    return lines


# The longest kernel name the line under an op shows (as Markdown's and the CSV's).
KERNEL_NAME_WIDTH = 80


def kernel_line(kernels: list[dict[str, Any]], width: int) -> str:
    """``  kernel: name×count`` (``; +N more``): an op's heaviest kernel on one line under its
    row, the name cut with an ellipsis to ``width`` as the table's cells are (C++ kernel names
    run to hundreds of characters), never past ``KERNEL_NAME_WIDTH``."""
    more = f"; +{len(kernels) - 1} more" if len(kernels) > 1 else ""
    room = width - len("  kernel: ") - len(f"×{kernels[0]['count']}") - len(more)
    name_width = max(min(room, KERNEL_NAME_WIDTH), 8)
    return f"  kernel: {kernel_summary(kernels, limit=1, width=name_width)}"


# The GEMM section's heaviest rows (JSON, Markdown and HTML: every row).
GEMM_ROWS = 5


def gemm_lines(report: Report, width: int, style: Style) -> list[str]:
    """The GEMM table (JSON ``gemms``), its ``GEMM_ROWS`` heaviest rows, fitted to ``width``."""
    if not report.gemms:
        return []
    shown = report.gemms[:GEMM_ROWS]
    columns = [
        Column(header, right=header in ("batch", "n", "time", "FLOP/s", "eff"))
        for header in GEMM_COLUMNS
    ]
    rows = [
        {c.header: [cell] for c, cell in zip(columns, gemm_cells(row, 40), strict=True)}
        for row in shown
    ]
    sep = 3 if style.colour else 2
    columns, widths = fit_columns(columns, rows, width, sep, (("kernel",), ("layout",)))
    title = f"GEMMs by shape (top {len(shown)} of {len(report.gemms)} by time, all devices)"
    lines = [style(title, "bold")]
    lines += table(columns, [[row[c.header] for c in columns] for row in rows], widths, style)
    return [*lines, ""]


def render(
    report: Report,
    *,
    top: int = 20,
    colour: bool = False,
    width: int = DEFAULT_WIDTH,
    heading: str | None = None,
    op_total: float | None = None,
) -> str:
    """The report as terminal text; no line is wider than ``width`` columns.  ``heading``:
    the op table's title when its ops were selected (``profan.report.render.selection``), and
    ``op_total`` the time of all ops, which the % column is a share of."""
    report = escaped(report)  # names from the trace are data: no control character passes
    style = Style(colour)
    s = report.summary
    d = report.device
    chip = report.chip
    devices = max(s.device_count, 1)
    out: list[str] = []

    def field(label: str, text: str) -> None:
        """``label`` in a 9-column gutter, ``text`` wrapped beside it."""
        wrapped = para(text, width - 9, indent=0, hang=2)
        out.append(f"{style(label.ljust(8), 'bold')} {wrapped[0]}")
        out.extend(" " * 9 + line for line in wrapped[1:])

    title = f"profan report: {report.trace.path}"
    out.extend(style(line, "bold") for line in para(title, width, hang=2))
    no_hlo = report.trace.hlo_missing
    if no_hlo:  # one line, not wrapped: what is missing and what to pass
        out.append(f"{style('HLO'.ljust(8), 'yellow')} {no_hlo}")
    field(
        "device",
        f"{d.count} × {d.type or d.kind} ({d.kind}, {len(d.hosts)} host(s))",
    )
    partial = report.trace.devices_partial
    if partial:
        field("", str(partial))
    transcendentals = ""
    rate = chip.transcendentals_per_s_device
    transcendentals = (
        f", transcendentals {si(rate, '/s')}" if rate else ", transcendental rate unknown"
    )
    field(
        "chip",
        f"{chip.name or '?'}: {si(chip.peak_flops_per_s, 'FLOP/s')}, HBM "
        f"{si(chip.hbm_bytes_per_s_device, 'B/s')}{transcendentals} per device  "
        f"[source: {chip.source}]",
    )
    if s.scorer.get("accounting_note"):
        field("", f"{s.scorer.get('accounting')}: {s.scorer['accounting_note']}")
    for module, axes in s.mesh.items():
        if axes:
            mesh_text = " × ".join(f"{name}={size}" for name, size in axes.items())
            field("mesh", f"{module}: {mesh_text}")
    if s.step_count:
        field(
            "steps",
            f"{s.step_count}   step time median {seconds(s.step_time_median_s)} "
            f"(min {seconds(s.step_time_min_s)}, p90 {seconds(s.step_time_p90_s)},"
            f" max {seconds(s.step_time_max_s)})",
        )
        noted = [(step.step, step.note) for step in report.steps if step.note]
        for step, note in noted[:2]:
            field("", f"step {step}: {note}")
        if len(noted) > 2:
            field("", f"… and notes on {len(noted) - 2} more steps (JSON: steps[].note)")
    else:
        field("steps", "none marked in the trace")
    mfu = mfu_text(s.mfu, s.scorer.get("mfu_peak_dtype"), s.scorer.get("mfu_peak_source"))
    step_share = step_share_text(s.step_ideal_s, s.step_measured_s)
    if no_hlo:
        pass  # no FLOPs and no roofline without the HLO: the line at the top says so
    elif step_share is not None:
        # The step is the honest comparison: async waits make a per-op sum of ideals misleading.
        field("MFU", f"{mfu}; {step_share}")
    else:
        op_time_per_device = s.total_op_time_s / devices
        field(
            "MFU",
            f"{mfu}; ideal (roofline) {seconds(s.ideal_time_s)} vs measured op "
            f"time {seconds(op_time_per_device)}, per device",
        )
    exposed_colour = "yellow" if s.exposed_comm_share > 0.1 else "green"
    exposed = seconds(s.exposed_comm_s / s.step_count if s.step_count else s.exposed_comm_s)
    field("comm", comm_text(s))
    if colour and exposed in out[-1]:
        out[-1] = out[-1].replace(exposed, style(exposed, exposed_colour), 1)
    field("idle", idle_text(s, report.steps))
    out.append("")
    categories = s.time_by_category_s
    total = sum(categories.values()) or 1.0
    category_text = ", ".join(
        f"{k} {seconds(v)} ({percent(v / total, 0)})" for k, v in categories.items()
    )
    basis = "per device, whole trace: "
    for i, line in enumerate(para(basis + category_text, width - 18, hang=0)):
        label = "time by category" if i == 0 else ""
        out.append(f"{style(label.ljust(16), 'bold')}  {line}")
    bounds = s.time_by_bound_s
    total_b = sum(bounds.values()) or 1.0
    bound_text = ", ".join(
        f"{k} {seconds(v)} ({percent(v / total_b, 0)})" for k, v in bounds.items() if v
    )
    by_bound = [] if no_hlo else para(basis + bound_text, width - 18, hang=0)
    for i, line in enumerate(by_bound):  # no HLO: every op's bound is unknown
        label = "time by bound" if i == 0 else ""
        out.append(f"{style(label.ljust(16), 'bold')}  {line}")
    out.append("")

    sections = {
        "ops": _ops_lines(report, top, width, style, heading, op_total),
        "gemms": gemm_lines(report, width, style),
        "memory": memory_terminal_lines(report, width),
        "hosts": hosts_terminal_lines(report, width),
        "findings": _findings_lines(report, top, width, style),
        "unmatched": _unmatched_lines(report, width),
        "notes": _notes_lines(report, width, style),
    }
    for lines in in_order(sections):
        out.extend(lines)
    return "\n".join(out) + "\n"


def _ops_lines(
    report: Report,
    top: int,
    width: int,
    style: Style,
    heading: str | None,
    op_total: float | None,
) -> list[str]:
    """The op table, its title and legends."""
    out: list[str] = []
    no_hlo = report.trace.hlo_missing
    devices = max(report.summary.device_count, 1)
    totals = "measured" if no_hlo else "measured, ideal, FLOPs and bytes"
    shown = min(top, len(report.ops))
    async_words = async_legend(report.ops[:top])
    out.extend(
        style(line, "bold")
        for line in para(heading or f"Top {shown} ops of {len(report.ops)} by total time", width)
    )
    out.extend(
        style(line, "dim")
        for line in para(
            f"{totals}: summed over all {devices} devices and the op's "
            "n executions (n counts every device); % of all op time"
            + (f"; {async_words}" if async_words else ""),
            width,
            hang=2,
        )
    )
    legend = None if no_hlo else sources_legend(report.ops[:top])
    if legend:
        out.extend(style(line, "dim") for line in para(legend, width, hang=2))
    out.extend(op_table(report, top, width, style, op_total))
    out.append("")
    return out


def _findings_lines(report: Report, top: int, width: int, style: Style) -> list[str]:
    """The rules' findings, one block per op, largest saving first."""
    out: list[str] = []
    if report.findings:
        out.append(
            style(f"Suspicious ({len(report.findings)} findings, largest saving first)", "bold")
        )
        # one block per op, and one for the whole profile, where its largest saving ranks;
        # "look at" advice once per rule
        groups = grouped_findings(report.findings)
        labels = {op.key: op.label for op in report.ops}
        advised: set[tuple[str, str]] = set()
        shown_ops = 0
        for key, findings in groups:
            if key is not None:
                if shown_ops >= top:
                    rest = sum(1 for k, _ in groups if k is not None) - top
                    out.append(f"  … and {rest} more ops (see --format json)")
                    break
                shown_ops += 1
                first = findings[0]
                head = labels.get(key) or first.name or key
                source = f"  [{short_path(first.source)}]" if first.source else ""
                out.extend(style(line, "bold") for line in para(f"{head}{source}", width, 2, 4))
            else:
                out.append(style("  profile (whole trace, no single op):", "bold"))
            for f in findings:
                saving = saving_text(f)
                text = f"{f.rule}: {f.message}" + (f"; {saving}" if saving else "")
                body = para(text, width, indent=4, hang=4)
                out.append(body[0].replace(f.rule, style(f.rule, "red"), 1))
                out.extend(body[1:])
                if (f.rule, f.look_at) not in advised:
                    advised.add((f.rule, f.look_at))
                    advice = para(f"look at: {f.look_at}", width, indent=6, hang=9)
                    out.append(advice[0].replace("look at:", style("look at:", "dim"), 1))
                    out.extend(advice[1:])
    else:
        out.append(style("Suspicious: none of the rules fired", "green"))
        out.extend(para("rules: " + ", ".join(RULES), width, indent=2, hang=4))
    out.append("")
    return out


def _unmatched_lines(report: Report, width: int) -> list[str]:
    """The op events that could not be joined to HLO, by reason."""
    out: list[str] = []
    unmatched = report.unmatched
    if unmatched:
        count = sum(u.count for u in unmatched)
        out.extend(
            para(
                f"Unmatched: {count} op events ({seconds(report.summary.unmatched_op_time_s)}, "
                "all devices) could not be joined to HLO:",
                width,
            )
        )
        for u in unmatched:
            examples = ", ".join(u.examples[:3])
            text = f"{u.count:>8}  {u.reason}" + (f"  (e.g. {examples})" if examples else "")
            out.extend(para(text, width, indent=2, hang=12))
    else:
        out.append("Unmatched: 0 op events (every event was joined to its HLO instruction)")
    return out


def _notes_lines(report: Report, width: int, style: Style) -> list[str]:
    """The notes on how the trace was read and scored (the first few)."""
    out: list[str] = []
    notes, rest = notes_shown(report)
    if notes:
        out.append("")
        out.append(style(NOTES_HEADING, "bold"))
        for note in notes:
            out.extend(para(f"- {note}", width, indent=2, hang=2))
        if rest:
            out.append(f"  {more_text(rest)}")
    return out


def write(report: Report, stream: IO[str] | None = None, *, top: int = 20) -> None:
    stream = stream or sys.stdout
    text = render(report, top=top, colour=use_colour(stream), width=terminal_width(stream))
    stream.write(text)
