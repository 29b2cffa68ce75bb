"""The report as Markdown (for PR comments, wikis)."""

from __future__ import annotations

from profan.escape import escaped, markdown_code, markdown_text
from profan.report.analysis.gemms import GEMM_COLUMNS, gemm_cells
from profan.report.analysis.hosts import markdown_lines as hosts_markdown_lines
from profan.report.analysis.kernels import short_name
from profan.report.analysis.notes import HEADING as NOTES_HEADING
from profan.report.analysis.notes import more_text, notes_shown
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
from profan.report.render.memory import markdown_lines as memory_markdown_lines
from profan.report.render.outline import in_order
from profan.report.render.terminal import (
    ROOFLINE_COLUMNS,
    async_legend,
    ideal_lines,
    measured_lines,
    sharding_lines,
    wait_lines,
)
from profan.report.rules.savings import grouped_findings


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


# The op table's columns and their alignment rows (``---:``: right-aligned).
_COLUMNS = (
    ("op", "---"),
    ("category", "---"),
    ("n", "---:"),
    ("measured", "---:"),
    ("ideal", "---:"),
    ("bound", "---"),
    ("eff", "---:"),
    ("wait", "---:"),
    ("FLOPs", "---:"),
    ("bytes", "---:"),
    ("sharding", "---"),
    ("source", "---"),
    ("flags", "---"),
)


def _gemm_lines(report: Report, top: int) -> list[str]:
    """The GEMM table (JSON ``gemms``), its ``top`` heaviest rows."""
    if not report.gemms:
        return []
    lines = [
        "",
        f"## GEMMs by shape ({min(top, len(report.gemms))} of {len(report.gemms)})",
        "",
        "Matmul ops grouped by M, N, K, batch, dtypes and layout (from the HLO); time and n over "
        "all devices; eff = the matmul's FLOPs at the peak its compute term used / time.",
        "",
        "| " + " | ".join(GEMM_COLUMNS) + " | ops |",
        "|---|---:|---|---|---:|---:|---:|---:|---|---|",
    ]
    for row in report.gemms[:top]:
        cells = [_cell(cell) for cell in gemm_cells(row)]
        cells[-1] = markdown_code(cells[-1]) if cells[-1] else ""
        ops = ", ".join(markdown_code(str(op)) for op in row.ops[:3])
        lines.append("| " + " | ".join(cells) + f" | {ops} |")
    return lines


def _note(op: OpEntry) -> str:
    note = f"<br>note: {op.note}" if op.note else ""
    if op.kernels:  # GPU: the op's heaviest kernel (JSON and HTML: all of them)
        top = op.kernels[0]
        more = f", +{len(op.kernels) - 1} more" if len(op.kernels) > 1 else ""
        note += f"<br>kernel: {markdown_code(short_name(top['name']))}×{top['count']}{more}"
    return note


def render(
    report: Report,
    *,
    top: int = 20,
    images: dict[str, str] | None = None,
    heading: str | None = None,
) -> str:
    """The report as Markdown; ``heading``: the op table's title when its ops were selected
    (``profan.report.render.selection``)."""
    report = escaped(report)  # names from the trace are data: no control character passes
    s, d, chip = report.summary, report.device, report.chip
    mfu = mfu_text(s.mfu, s.scorer.get("mfu_peak_dtype"), s.scorer.get("mfu_peak_source"))
    step_share = step_share_text(s.step_ideal_s, s.step_measured_s)
    lines = [f"# profan report: {markdown_code(report.trace.path)}", ""]
    no_hlo = report.trace.hlo_missing
    if no_hlo:
        lines += [f"**HLO:** {_cell(no_hlo)}", ""]
    lines += [
        "| | |",
        "|---|---|",
        f"| device | {d.count} × {d.type or d.kind} ({d.kind}) |",
        *(
            [f"| devices | {_cell(str(report.trace.devices_partial))} |"]
            if report.trace.devices_partial
            else []
        ),
        f"| chip | {chip.name or '?'}: {si(chip.peak_flops_per_s, 'FLOP/s')}, HBM "
        f"{si(chip.hbm_bytes_per_s_device, 'B/s')} (source: {chip.source}) |",
        *(
            [f"| accounting | {_cell(str(s.scorer['accounting_note']))} |"]
            if s.scorer.get("accounting_note")
            else []
        ),
        f"| steps | {s.step_count} |",
        f"| step time | median {seconds(s.step_time_median_s)}, min "
        f"{seconds(s.step_time_min_s)}, max {seconds(s.step_time_max_s)} |",
        *[f"| step {st.step} | {_cell(st.note)} |" for st in report.steps if st.note],
        *(
            []  # no FLOPs and no roofline without the HLO: the line at the top says so
            if no_hlo
            else [
                f"| MFU | {_cell(mfu)} |",
                f"| ideal step (roofline) | {_cell(step_share or '-')} |",
            ]
        ),
        f"| communication | {_cell(comm_text(s))} |",
        f"| idle | {_cell(idle_text(s, report.steps))} |",
        "",
        "## Time by category",
        "",
        "| category | time per device, whole trace |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {seconds(v)} |" for k, v in s.time_by_category_s.items()]
    if not no_hlo:  # without the HLO every op's bound is unknown: no section
        lines += [
            "",
            "## Time by bound",
            "",
            "| bound | time per device, whole trace |",
            "|---|---:|",
        ]
        lines += [f"| {k} | {seconds(v)} |" for k, v in s.time_by_bound_s.items() if v]
    charts: list[str] = []
    for name, src in (images or {}).items():
        charts += ["", f"![{name}]({src})"]
    sections = {
        "charts": charts,
        "ops": _ops_lines(report, top, heading),
        "gemms": _gemm_lines(report, top),
        "memory": ["", *memory_markdown_lines(report)],
        "hosts": hosts_markdown_lines(report),
        "findings": _findings_lines(report),
        "unmatched": _unmatched_lines(report),
        "notes": _notes_lines(report),
    }
    for part in in_order(sections):
        lines += part
    return "\n".join(lines) + "\n"


def _ops_lines(report: Report, top: int, heading: str | None) -> list[str]:
    """The op table, its title and legend."""
    no_hlo = report.trace.hlo_missing
    legend = None if no_hlo else sources_legend(report.ops[:top])
    async_words = async_legend(report.ops[:top])
    columns = [c for c in _COLUMNS if not (no_hlo and c[0] in ROOFLINE_COLUMNS)]
    lines = [
        "",
        f"## {heading or f'Top {min(top, len(report.ops))} ops of {len(report.ops)}'}",
        "",
        f"{'measured' if no_hlo else 'measured, ideal, FLOPs and bytes'}: summed over all "
        f"{report.summary.device_count} devices and the op's n "
        "executions (n counts every device)."
        + (f" {async_words[0].upper()}{async_words[1:]}." if async_words else "")
        + (f" {legend}." if legend else ""),
        "",
        "| " + " | ".join(name for name, _ in columns) + " |",
        "|" + "|".join(align for _, align in columns) + "|",
    ]
    for op in report.ops[:top]:
        sharding = " ".join(sharding_lines(op)).strip()
        cells = {
            "op": markdown_code(op.label),
            "category": op.category,
            "n": str(op.occurrences),
            "measured": "<br>".join(measured_lines(op)),
            "ideal": "<br>".join(ideal_lines(op)),
            "bound": op.bound_by,
            "eff": percent(op.efficiency),
            "wait": "<br>".join(wait_lines(op)),
            "FLOPs": "<br>".join(flops_lines(op)),
            "bytes": "<br>".join(bytes_lines(op)),
            "sharding": _cell(sharding),
            "source": markdown_text(op.source or ""),
            "flags": _cell(", ".join(op.flags) + _note(op)),
        }
        lines.append("| " + " | ".join(cells[name] for name, _ in columns) + " |")
    return lines


def _findings_lines(report: Report) -> list[str]:
    """The rules' findings: one group per op, and whole-profile findings (no op) in their
    own, ranked by saving."""
    lines = ["", f"## Suspicious ops ({len(report.findings)})", ""]
    if report.findings:
        lines += ["Largest saving first.", ""]
    labels = {op.key: op.label for op in report.ops}
    for key, findings in grouped_findings(report.findings):
        if key is None:
            lines += ["**profile** (whole trace, no single op)", ""]
        else:
            first = findings[0]
            source = f" ({markdown_text(first.source)})" if first.source else ""
            lines += [f"**{markdown_code(labels.get(key) or first.name or key)}**{source}", ""]
        for f in findings:
            saving = saving_text(f)
            lines.append(
                f"- **{f.rule}**: {_cell(f.message).replace('<', '&lt;')}"
                + (f"; {saving}" if saving else "")
                + f". *Look at:* {f.look_at}"
            )
        lines.append("")
    if not report.findings:
        lines.append("None of the rules fired.")
    if lines[-1] == "":
        lines.pop()
    return lines


def _unmatched_lines(report: Report) -> list[str]:
    lines = ["", "## Unmatched", ""]
    if report.unmatched:
        lines += [f"- {u.count} events: {u.reason}" for u in report.unmatched]
    else:
        lines.append("Every op event was joined to its HLO instruction.")
    return lines


def _notes_lines(report: Report) -> list[str]:
    notes, rest = notes_shown(report)
    if not notes:
        return []
    lines = ["", f"## {NOTES_HEADING}", ""]
    lines += [f"- {markdown_text(note)}" for note in notes]
    lines += [f"- {more_text(rest)}"] if rest else []
    return lines
