"""The report as text for a terminal: ANSI colour and box tables on a TTY, plain when piped."""

from __future__ import annotations

import os
import sys
from typing import IO

from profan.report.format import percent, seconds, si, wrap_name
from profan.report.model import OpEntry, Report
from profan.report.rules import RULES

_CODES = {"bold": "1", "dim": "2", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}


class Style:
    def __init__(self, colour: bool) -> None:
        self.colour = colour

    def __call__(self, text: str, *styles: str) -> str:
        if not self.colour or not styles:
            return text
        codes = ";".join(_CODES[s] for s in styles)
        return f"\x1b[{codes}m{text}\x1b[0m"


def use_colour(stream: IO[str]) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def _visible_len(text: str) -> int:
    out, skipping = 0, False
    for char in text:
        if char == "\x1b":
            skipping = True
        elif skipping and char == "m":
            skipping = False
        elif not skipping:
            out += 1
    return out


def table(
    headers: list[str], rows: list[list[list[str] | str]], right: set[int], style: Style
) -> list[str]:
    """Rows of cells; a cell may hold several lines (wrapped names)."""
    cells = [[c if isinstance(c, list) else [c] for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], *(_visible_len(line) for line in cell))

    def pad(text: str, i: int) -> str:
        gap = " " * (widths[i] - _visible_len(text))
        return gap + text if i in right else text + gap

    sep = "  " if not style.colour else " │ "
    lines = [style(sep.join(pad(h, i) for i, h in enumerate(headers)).rstrip(), "bold")]
    lines.append(
        ("─" if style.colour else "-") * min(sum(widths) + len(sep) * (len(widths) - 1), 200)
    )
    for row in cells:
        height = max(len(c) for c in row)
        for k in range(height):
            parts = [pad(cell[k] if k < len(cell) else "", i) for i, cell in enumerate(row)]
            lines.append(sep.join(parts).rstrip())
    return lines


def sharding_lines(op: OpEntry) -> list[str]:
    """``all-reduce ×4 over data`` and the global shapes, one per line."""
    lines = []
    if op.collective:
        text = f"{op.collective.get('kind')} ×{op.collective.get('group_size')}"
        if op.collective.get("axes"):
            text += " over " + ",".join(op.collective["axes"])
        lines.append(text)
    lines.extend(op.global_shapes)
    return lines or [""]


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
    return style(f"{value:.0%}", colour)


def render(report: Report, *, top: int = 20, colour: bool = False, width: int = 120) -> str:
    style = Style(colour)
    s = report.summary
    d = report.device
    chip = report.chip
    out: list[str] = []
    title = f"profan report: {report.trace.get('path', '')}"
    out.append(style(title, "bold"))
    device_text = f"{d.get('count')} × {d.get('type') or d.get('kind')}"
    out.append(f"device   {device_text}  ({d.get('kind')}, {len(d.get('hosts') or [])} host(s))")
    from profan.report.model import peak_flops, peak_hbm_bw

    out.append(
        f"chip     {chip.get('name', '?')}: {si(peak_flops(chip), 'FLOP/s')}, "
        f"HBM {si(peak_hbm_bw(chip), 'B/s')}  [source: {chip.get('source')}]"
    )
    for module, axes in (s.get("mesh") or {}).items():
        if axes:
            mesh_text = " × ".join(f"{name}={size}" for name, size in axes.items())
            out.append(f"mesh     {module}: {mesh_text}")
    if s.get("step_count"):
        out.append(
            f"steps    {s['step_count']}   step time median {seconds(s.get('step_time_median_s'))}"
            f"  (min {seconds(s.get('step_time_min_s'))}, p90 {seconds(s.get('step_time_p90_s'))},"
            f" max {seconds(s.get('step_time_max_s'))})"
        )
    else:
        out.append("steps    none marked in the trace")
    mfu = s.get("mfu")
    step_ideal, step_measured = s.get("score_step_ideal_s"), s.get("score_step_measured_s")
    if step_ideal and step_measured:
        # The step is the honest comparison: async waits make a per-op sum of ideals misleading.
        out.append(
            f"MFU      {percent(mfu)}   ideal step {seconds(step_ideal)} vs measured "
            f"{seconds(step_measured)} (mean), efficiency {percent(step_ideal / step_measured)}"
        )
    else:
        op_time_per_device = s.get("total_op_time_s", 0) / max(s.get("device_count", 1), 1)
        out.append(
            f"MFU      {percent(mfu)}   ideal (roofline) {seconds(s.get('ideal_time_s'))} "
            f"per device vs measured op time {seconds(op_time_per_device)}"
        )
    exposed_colour = "yellow" if (s.get("exposed_comm_share") or 0) > 0.1 else "green"
    out.append(
        f"comm     collectives {seconds(s.get('collective_time_s'))}, exposed (not overlapped with "
        f"compute) {style(seconds(s.get('exposed_comm_s')), exposed_colour)}"
        f" = {percent(s.get('exposed_comm_share'))} of the busy span"
    )
    out.append(
        f"idle     {seconds(s.get('idle_s'))} inside the busy span per device; between steps "
        f"{seconds(s.get('inter_step_gap_total_s'))} "
        f"(longest {seconds(s.get('inter_step_gap_max_s'))})"
    )
    out.append("")
    total = sum(s.get("time_by_category_s", {}).values()) or 1.0
    category_text = ", ".join(
        f"{k} {seconds(v)} ({v / total:.0%})" for k, v in s.get("time_by_category_s", {}).items()
    )
    out.append(f"{style('time by category', 'bold')}  {category_text}")
    bounds = s.get("time_by_bound_s", {})
    total_b = sum(bounds.values()) or 1.0
    bound_text = ", ".join(f"{k} {seconds(v)} ({v / total_b:.0%})" for k, v in bounds.items() if v)
    out.append(f"{style('time by bound', 'bold')}     {bound_text}")
    out.append("")

    out.append(
        style(f"Top {min(top, len(report.ops))} ops of {len(report.ops)} by total time", "bold")
    )
    name_width = max(24, min(48, width - 100))
    rows = []
    op_total = sum(op.measured_s for op in report.ops) or 1.0
    for op in report.ops[:top]:
        sharding = sharding_lines(op)
        flags = style(",".join(op.flags), "red") if op.flags else ""
        rows.append(
            [
                wrap_name(op.name, name_width),
                op.category,
                str(op.occurrences),
                seconds(op.measured_s),
                f"{op.measured_s / op_total:.0%}",
                seconds(op.roofline_s),
                op.bound_by,
                efficiency_text(op.efficiency, style),
                si(op.flops),
                si(op.hbm_bytes + op.ici_bytes, "B"),
                sharding,
                wrap_name(short_path(op.source), 36) if op.source else "",
                flags,
            ]
        )
    out.extend(
        table(
            [
                "op",
                "category",
                "n",
                "measured",
                "%",
                "ideal",
                "bound",
                "eff",
                "FLOPs",
                "bytes",
                "sharding",
                "source",
                "flags",
            ],
            rows,
            right={2, 3, 4, 5, 7, 8, 9},
            style=style,
        )
    )
    out.append("")
    if report.findings:
        out.append(style(f"Suspicious ({len(report.findings)} findings)", "bold"))
        # one block per op (heaviest first); "look at" advice once per rule
        groups: dict[str | None, list] = {}
        for f in report.findings:
            groups.setdefault(f.op or f"profile:{f.rule}:{f.message}", []).append(f)
        advised: set[str] = set()
        for shown_groups, findings in enumerate(groups.values()):
            if shown_groups >= top:
                out.append(f"  … and {len(groups) - top} more ops (see --format json)")
                break
            first = findings[0]
            if first.name:
                source = f"  [{short_path(first.source)}]" if first.source else ""
                out.append(f"  {style(first.name, 'bold')}{source}")
            for f in findings:
                out.append(f"    {style(f.rule, 'red')}: {f.message}")
                if f.rule not in advised:
                    advised.add(f.rule)
                    out.append(f"      {style('look at:', 'dim')} {f.look_at}")
    else:
        out.append(style("Suspicious: none of the rules fired", "green"))
        out.append("  rules: " + ", ".join(RULES))
    out.append("")
    unmatched = report.unmatched
    if unmatched:
        count = sum(u["count"] for u in unmatched)
        out.append(
            f"Unmatched: {count} op events ({seconds(s.get('unmatched_op_time_s'))}) could not be "
            "joined to HLO:"
        )
        for u in unmatched:
            examples = ", ".join(u.get("examples", [])[:3])
            out.append(
                f"  {u['count']:>8}  {u['reason']}" + (f"  (e.g. {examples})" if examples else "")
            )
    else:
        out.append("Unmatched: 0 op events (every event was joined to its HLO instruction)")
    return "\n".join(out) + "\n"


def write(report: Report, stream: IO[str] | None = None, *, top: int = 20) -> None:
    stream = stream or sys.stdout
    stream.write(render(report, top=top, colour=use_colour(stream)))
