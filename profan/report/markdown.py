"""The report as Markdown (for PR comments, wikis)."""

from __future__ import annotations

from profan.report.escape import escaped, markdown_code, markdown_text
from profan.report.format import (
    bytes_lines,
    flops_lines,
    grouped_findings,
    mfu_text,
    percent,
    seconds,
    si,
    sources_legend,
    step_share_text,
)
from profan.report.hosts import markdown_lines as hosts_markdown_lines
from profan.report.memory import markdown_lines as memory_markdown_lines
from profan.report.model import OpEntry, Report
from profan.report.terminal import (
    async_legend,
    ideal_lines,
    measured_lines,
    sharding_lines,
    wait_lines,
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _note(op: OpEntry) -> str:
    return f"<br>note: {op.note}" if op.note else ""


def render(
    report: Report,
    *,
    top: int = 20,
    images: dict[str, str] | None = None,
    heading: str | None = None,
) -> str:
    """The report as Markdown; ``heading``: the op table's title when its ops were selected
    (``profan.report.selection``)."""
    report = escaped(report)  # names from the trace are data: no control character passes
    s, d, chip = report.summary, report.device, report.chip
    devices = s.device_count
    mfu = mfu_text(s.mfu, s.scorer.get("mfu_peak_dtype"), s.scorer.get("mfu_peak_source"))
    step_share = step_share_text(s.step_ideal_s, s.step_measured_s)
    legend = sources_legend(report.ops[:top])
    async_words = async_legend(report.ops[:top])
    lines = [f"# profan report: {markdown_code(report.trace.get('path', ''))}", ""]
    no_hlo = report.trace.get("hlo_missing")
    if no_hlo:
        lines += [f"**HLO:** {_cell(no_hlo)}", ""]
    lines += [
        "| | |",
        "|---|---|",
        f"| device | {d.get('count')} × {d.get('type') or d.get('kind')} ({d.get('kind')}) |",
        f"| chip | {chip.get('name', '?')}: {si(chip.get('peak_flops_per_s'), 'FLOP/s')}, HBM "
        f"{si(chip.get('hbm_bytes_per_s_device'), 'B/s')} (source: {chip.get('source')}) |",
        *(
            [f"| accounting | {_cell(str(s.scorer['accounting_note']))} |"]
            if s.scorer.get("accounting_note")
            else []
        ),
        f"| steps | {s.step_count} |",
        f"| step time | median {seconds(s.step_time_median_s)}, min "
        f"{seconds(s.step_time_min_s)}, max {seconds(s.step_time_max_s)} |",
        *[f"| step {st['step']} | {_cell(st['note'])} |" for st in report.steps if st.get("note")],
        *(
            []  # no FLOPs and no roofline without the HLO: the line at the top says so
            if no_hlo
            else [
                f"| MFU | {_cell(mfu)} |",
                f"| ideal step (roofline) | {_cell(step_share or '-')} |",
            ]
        ),
        f"| exposed communication | {seconds(s.exposed_comm_s)} per device "
        f"({percent(s.exposed_comm_share)} of the busy span) |",
        f"| idle | {seconds(s.idle_s)} per device inside the busy span, "
        f"{seconds(s.inter_step_gap_total_s)} "
        "between steps |",
        "",
        "## Time by category",
        "",
        "| category | time per device |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {seconds(v)} |" for k, v in s.time_by_category_s.items()]
    lines += ["", "## Time by bound", "", "| bound | time per device |", "|---|---:|"]
    lines += [f"| {k} | {seconds(v)} |" for k, v in s.time_by_bound_s.items() if v]
    for name, src in (images or {}).items():
        lines += ["", f"![{name}]({src})"]
    lines += [
        "",
        f"## {heading or f'Top {min(top, len(report.ops))} ops of {len(report.ops)}'}",
        "",
        f"measured, ideal, FLOPs and bytes: summed over all {devices} devices and the op's n "
        "executions (n counts every device)."
        + (f" {async_words[0].upper()}{async_words[1:]}." if async_words else "")
        + (f" {legend}." if legend else ""),
        "",
        "| op | category | n | measured | ideal | bound | eff | wait | FLOPs | bytes | sharding "
        "| source | flags |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---|---|",
    ]
    for op in report.ops[:top]:
        sharding = " ".join(sharding_lines(op)).strip()
        lines.append(
            f"| {markdown_code(op.label)} | {op.category} | {op.occurrences} | "
            f"{'<br>'.join(measured_lines(op))} | "
            f"{'<br>'.join(ideal_lines(op))} | {op.bound_by} | {percent(op.efficiency)} | "
            f"{'<br>'.join(wait_lines(op))} | "
            f"{'<br>'.join(flops_lines(op))} | {'<br>'.join(bytes_lines(op))} | "
            f"{_cell(sharding)} | "
            f"{markdown_text(op.source or '')} | {_cell(', '.join(op.flags) + _note(op))} |"
        )
    lines += ["", *memory_markdown_lines(report)]
    lines += hosts_markdown_lines(report)
    lines += ["", f"## Suspicious ops ({len(report.findings)})", ""]
    # whole-profile findings (no op) in their own group, then one group per op
    labels = {op.key: op.label for op in report.ops}
    for key, findings in grouped_findings(report.findings):
        if key is None:
            lines += ["**profile** (whole trace, no single op)", ""]
        else:
            first = findings[0]
            source = f" ({markdown_text(first.source)})" if first.source else ""
            lines += [f"**{markdown_code(labels.get(key) or first.name or key)}**{source}", ""]
        for f in findings:
            lines.append(
                f"- **{f.rule}**: {_cell(f.message).replace('<', '&lt;')}. *Look at:* {f.look_at}"
            )
        lines.append("")
    if not report.findings:
        lines.append("None of the rules fired.")
    if lines[-1] == "":
        lines.pop()
    lines += ["", "## Unmatched", ""]
    if report.unmatched:
        lines += [f"- {u['count']} events: {u['reason']}" for u in report.unmatched]
    else:
        lines.append("Every op event was joined to its HLO instruction.")
    return "\n".join(lines) + "\n"
