"""The page's static sections: findings and unmatched events (readable without scripts; op
names carry ``data-op`` so the page opens their detail on a click)."""

from __future__ import annotations

from html import escape

from profan.report.analysis.gemms import GEMM_COLUMNS, gemm_cells
from profan.report.format import saving_text
from profan.report.model import Report
from profan.report.rules.savings import grouped_findings


def _op_link(key: str, label: str) -> str:
    return (
        f"<a class='op-link' href='#op={escape(key)}' data-op='{escape(key)}'>{escape(label)}</a>"
    )


def findings_html(report: Report) -> str:
    parts = [
        f"<section id='findings'><h2>Suspicious ops ({len(report.findings)})</h2>",
        "<ul class='findings'>",
    ]
    labels = {op.key: op.label for op in report.ops}
    for key, findings in grouped_findings(report.findings):
        if key is None:
            parts.append("<li class='group'><b>profile</b> (whole trace, no single op)<ul>")
        else:
            first = findings[0]
            source = f" <span class='source'>{escape(first.source)}</span>" if first.source else ""
            label = labels.get(key)
            name = _op_link(key, label) if label else f"<code>{escape(first.name or key)}</code>"
            parts.append(f"<li class='group'>{name}{source}<ul>")
        for f in findings:
            host = f" <i>host {escape(f.host)}</i>" if f.host else ""
            saving = saving_text(f)
            saved = f"; <span class='saving'>{escape(saving)}</span>" if saving else ""
            parts.append(
                f"<li><b class='rule'>{escape(f.rule)}</b>{host}: {escape(f.message)}{saved}. "
                f"<span class='look-at'><i>Look at:</i> {escape(f.look_at)}</span></li>"
            )
        parts.append("</ul></li>")
    if not report.findings:
        parts.append("<li class='ok'>None of the rules fired.</li>")
    parts.append("</ul></section>")
    return "".join(parts)


def unmatched_html(report: Report) -> str:
    parts = ["<section id='unmatched'><h2>Unmatched</h2><ul>"]
    for u in report.unmatched:
        examples = ", ".join(u.examples[:3])
        parts.append(
            f"<li>{u.count} events: {escape(u.reason)}"
            + (f" (e.g. <code>{escape(examples)}</code>)" if examples else "")
            + "</li>"
        )
    if not report.unmatched:
        parts.append("<li>Every op event was joined to its HLO instruction.</li>")
    parts.append("</ul></section>")
    return "".join(parts)


def gemms_html(report: Report) -> str:
    """The GEMM table (JSON ``gemms``, ``profan.report.analysis.gemms``): every row, its ops
    linked to their detail; empty without matmuls."""
    if not report.gemms:
        return ""
    head = "".join(f"<th>{escape(name)}</th>" for name in (*GEMM_COLUMNS, "ops"))
    parts = [
        f"<section id='gemms'><h2>GEMMs by shape ({len(report.gemms)})</h2><p class='muted'>"
        "Matmul ops grouped by M, N, K, batch, dtypes and layout (from the HLO); time and n "
        "over all devices; eff = the matmul's FLOPs at the peak its compute term used / time."
        f"</p><div class='table-wrap'><table class='gemms'><tr>{head}</tr>"
    ]
    keys = {op.label: op.key for op in report.ops}
    for row in report.gemms:
        cells = "".join(f"<td>{escape(cell)}</td>" for cell in gemm_cells(row, 0))
        ops = ", ".join(
            _op_link(keys[label], label) if label in keys else f"<code>{escape(label)}</code>"
            for label in row.ops
        )
        parts.append(f"<tr>{cells}<td>{ops}</td></tr>")
    parts.append("</table></div></section>")
    return "".join(parts)
