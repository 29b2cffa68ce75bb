"""The report as Markdown (for PR comments, wikis)."""

from __future__ import annotations

from profan.report.format import percent, seconds, si
from profan.report.model import Report, peak_flops, peak_hbm_bw
from profan.report.terminal import sharding_lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(report: Report, *, top: int = 20, images: dict[str, str] | None = None) -> str:
    s, d, chip = report.summary, report.device, report.chip
    lines = [f"# profan report: `{report.trace.get('path', '')}`", ""]
    lines += [
        "| | |",
        "|---|---|",
        f"| device | {d.get('count')} × {d.get('type') or d.get('kind')} ({d.get('kind')}) |",
        f"| chip | {chip.get('name', '?')}: {si(peak_flops(chip), 'FLOP/s')}, HBM "
        f"{si(peak_hbm_bw(chip), 'B/s')} (source: {chip.get('source')}) |",
        f"| steps | {s.get('step_count')} |",
        f"| step time | median {seconds(s.get('step_time_median_s'))}, min "
        f"{seconds(s.get('step_time_min_s'))}, max {seconds(s.get('step_time_max_s'))} |",
        f"| MFU | {percent(s.get('mfu'))} |",
        f"| ideal step (roofline) | {seconds(s.get('score_step_ideal_s'))} vs measured "
        f"{seconds(s.get('score_step_measured_s'))} (mean) |",
        f"| exposed communication | {seconds(s.get('exposed_comm_s'))} "
        f"({percent(s.get('exposed_comm_share'))} of the busy span) |",
        f"| idle | {seconds(s.get('idle_s'))} inside, {seconds(s.get('inter_step_gap_total_s'))} "
        "between steps |",
        "",
        "## Time by category",
        "",
        "| category | time per device |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {seconds(v)} |" for k, v in s.get("time_by_category_s", {}).items()]
    lines += ["", "## Time by bound", "", "| bound | time per device |", "|---|---:|"]
    lines += [f"| {k} | {seconds(v)} |" for k, v in s.get("time_by_bound_s", {}).items() if v]
    for name, src in (images or {}).items():
        lines += ["", f"![{name}]({src})"]
    lines += [
        "",
        f"## Top {min(top, len(report.ops))} ops of {len(report.ops)}",
        "",
        "| op | category | n | measured | ideal | bound | eff | FLOPs | bytes | sharding | source"
        " | flags |",
        "|---|---|---:|---:|---:|---|---:|---:|---:|---|---|---|",
    ]
    for op in report.ops[:top]:
        sharding = " ".join(sharding_lines(op)).strip()
        lines.append(
            f"| `{_cell(op.name)}` | {op.category} | {op.occurrences} | {seconds(op.measured_s)} | "
            f"{seconds(op.roofline_s)} | {op.bound_by} | {percent(op.efficiency)} | "
            f"{si(op.flops)} | {si(op.hbm_bytes + op.ici_bytes, 'B')} | {_cell(sharding)} | "
            f"{_cell(op.source or '')} | {', '.join(op.flags)} |"
        )
    lines += ["", f"## Suspicious ops ({len(report.findings)})", ""]
    for f in report.findings:
        where = f"`{f.name}` " if f.name else ""
        source = f" ({f.source})" if f.source else ""
        lines.append(f"- **{f.rule}**: {where}{_cell(f.message)}{source}. *Look at:* {f.look_at}")
    if not report.findings:
        lines.append("None of the rules fired.")
    lines += ["", "## Unmatched", ""]
    if report.unmatched:
        lines += [f"- {u['count']} events: {u['reason']}" for u in report.unmatched]
    else:
        lines.append("Every op event was joined to its HLO instruction.")
    return "\n".join(lines) + "\n"
