"""The report as one self-contained HTML page (plots embedded as base64 PNG)."""

from __future__ import annotations

import base64
from html import escape

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
from profan.report.hosts import html_section as hosts_html_section
from profan.report.memory import html_section as memory_html_section
from profan.report.model import Report
from profan.report.terminal import measured_lines, sharding_lines

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 20px; } h2 { font-size: 16px; margin-top: 28px; }
table { border-collapse: collapse; font-size: 12px; }
th, td { border: 1px solid #bbb; padding: 3px 6px; vertical-align: top; }
th { background: #2b4a6f; color: #fff; text-align: left; }
tr:nth-child(even) td { background: #eef2f7; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.name { max-width: 320px; word-break: break-all; font-family: monospace; }
.bad { color: #b00020; font-weight: bold; } .ok { color: #1b7f3b; } .warn { color: #b36b00; }
.plots img { max-width: 720px; border: 1px solid #ddd; margin: 4px; }
.header td:first-child { font-weight: bold; }
"""


def _efficiency_class(value: float | None) -> str:
    if value is None:
        return ""
    return "bad" if value < 0.1 else "warn" if value < 0.5 else "ok"


def render(report: Report, pngs: dict[str, bytes], *, top: int = 30) -> str:
    s, d, chip = report.summary, report.device, report.chip
    e = escape
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>profan report: {e(str(report.trace.get('path', '')))}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>profan report: <code>{e(str(report.trace.get('path', '')))}</code></h1>",
        "<table class='header'>",
    ]
    header = [
        ("device", f"{d.get('count')} × {d.get('type') or d.get('kind')} ({d.get('kind')})"),
        (
            "chip",
            f"{chip.get('name', '?')}: {si(chip.get('peak_flops_per_s'), 'FLOP/s')}, HBM "
            f"{si(chip.get('hbm_bytes_per_s_device'), 'B/s')} (source: {chip.get('source')})",
        ),
        *(
            [("accounting", str(s.scorer["accounting_note"]))]
            if s.scorer.get("accounting_note")
            else []
        ),
        ("steps", str(s.step_count)),
        (
            "step time",
            f"median {seconds(s.step_time_median_s)}, min "
            f"{seconds(s.step_time_min_s)}, max {seconds(s.step_time_max_s)}",
        ),
        *[(f"step {st['step']}", str(st["note"])) for st in report.steps if st.get("note")],
        ("MFU", mfu_text(s.mfu, s.scorer.get("mfu_peak_dtype"), s.scorer.get("mfu_peak_source"))),
        ("ideal step (roofline)", step_share_text(s.step_ideal_s, s.step_measured_s) or "-"),
        (
            "exposed communication",
            f"{seconds(s.exposed_comm_s)} per device "
            f"({percent(s.exposed_comm_share)} of the busy span)",
        ),
        (
            "idle",
            f"{seconds(s.idle_s)} per device inside the busy span, "
            f"{seconds(s.inter_step_gap_total_s)} between steps",
        ),
        (
            "time by category (per device)",
            ", ".join(f"{k} {seconds(v)}" for k, v in s.time_by_category_s.items()),
        ),
        (
            "time by bound (per device)",
            ", ".join(f"{k} {seconds(v)}" for k, v in s.time_by_bound_s.items() if v),
        ),
    ]
    parts += [f"<tr><td>{e(k)}</td><td>{e(v)}</td></tr>" for k, v in header]
    parts.append("</table>")

    parts.append("<h2>Plots</h2><div class='plots'>")
    for name, data in pngs.items():
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(
            f"<img id='plot-{e(name)}' alt='{e(name)}' src='data:image/png;base64,{encoded}'>"
        )
    parts.append("</div>")

    parts.append(f"<h2>Top {min(top, len(report.ops))} ops of {len(report.ops)} by total time</h2>")
    devices = max(s.device_count, 1)
    parts.append(
        f"<p>measured, ideal, FLOPs and bytes: summed over all {devices} devices and the op's "
        "n executions (n counts every device)."
        + (f" {e(legend)}." if (legend := sources_legend(report.ops[:top])) else "")
        + "</p>"
    )
    parts.append("<table id='ops'><tr>")
    columns = [
        "op",
        "category",
        "n",
        "measured",
        "ideal",
        "bound",
        "efficiency",
        "FLOPs",
        "bytes",
        "sharding",
        "source",
        "flags",
    ]
    parts += [f"<th>{c}</th>" for c in columns]
    parts.append("</tr>")
    for op in report.ops[:top]:
        sharding = " ".join(sharding_lines(op)).strip()
        parts.append(
            "<tr>"
            f"<td class='name'>{e(op.label)}</td><td>{e(op.category)}</td>"
            f"<td class='num'>{op.occurrences}</td>"
            f"<td class='num'>{'<br>'.join(e(line) for line in measured_lines(op))}</td>"
            f"<td class='num'>{seconds(op.roofline_s)}</td><td>{e(op.bound_by)}</td>"
            f"<td class='num {_efficiency_class(op.efficiency)}'>{percent(op.efficiency)}</td>"
            f"<td class='num'>{'<br>'.join(e(x) for x in flops_lines(op))}</td>"
            f"<td class='num'>{'<br>'.join(e(x) for x in bytes_lines(op))}</td>"
            f"<td>{e(sharding)}</td><td>{e(op.source or '')}</td>"
            f"<td><span class='bad'>{e(', '.join(op.flags))}</span>"
            + (f"<br><i>note: {e(op.note)}</i>" if op.note else "")
            + "</td></tr>"
        )
    parts.append("</table>")

    parts.append(memory_html_section(report))
    parts.append(hosts_html_section(report))
    parts.append(f"<h2>Suspicious ops ({len(report.findings)})</h2><ul>")
    # whole-profile findings (no op) in their own group, then one group per op
    labels = {op.key: op.label for op in report.ops}
    for key, findings in grouped_findings(report.findings):
        if key is None:
            parts.append("<li class='group'><b>profile</b> (whole trace, no single op)<ul>")
        else:
            first = findings[0]
            source = f" ({e(first.source)})" if first.source else ""
            label = labels.get(key) or first.name or key
            parts.append(f"<li class='group'><code>{e(label)}</code>{source}<ul>")
        for f in findings:
            parts.append(
                f"<li><b class='bad'>{e(f.rule)}</b>: {e(f.message)}. "
                f"<i>Look at:</i> {e(f.look_at)}</li>"
            )
        parts.append("</ul></li>")
    if not report.findings:
        parts.append("<li class='ok'>None of the rules fired.</li>")
    parts.append("</ul><h2>Unmatched</h2><ul>")
    for u in report.unmatched:
        parts.append(f"<li>{u['count']} events: {e(u['reason'])}</li>")
    if not report.unmatched:
        parts.append("<li>Every op event was joined to its HLO instruction.</li>")
    parts.append("</ul></body></html>")
    return "\n".join(parts)
