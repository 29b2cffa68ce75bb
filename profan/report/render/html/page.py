"""The report as one self-contained HTML page: styles, scripts and data inline, no request to
any network, so it opens from disk, a CI artifact or an e-mail.

The page is drawn from the ``Report`` alone (``Report.to_dict()`` is its data), so a report read
back from JSON renders the same bytes.  The interactive parts are small vanilla scripts kept as
real files in ``assets/`` (canvas for the timeline, SVG for the charts) and inlined here; the
header, findings, memory and host sections are plain HTML that read without scripts.
"""

from __future__ import annotations

import json
from functools import cache
from html import escape
from importlib.resources import files
from typing import Any

from profan.report.analysis.hosts import html_section as hosts_section
from profan.report.format import bytes_lines, flops_lines, seconds, sources_legend
from profan.report.model import OpEntry, Report
from profan.report.render.html.header import header_html
from profan.report.render.html.sections import findings_html, gemms_html, unmatched_html
from profan.report.render.memory import html_section as memory_section
from profan.report.render.outline import SECTIONS, in_order
from profan.report.render.terminal import (
    async_legend,
    ideal_lines,
    measured_lines,
    sharding_lines,
    wait_lines,
)

# Concatenated in this order inside one function scope (each file uses the ones before it).
SCRIPTS = ("util.js", "table.js", "detail.js", "charts.js", "timeline.js", "main.js")
STYLE = "page.css"


@cache
def asset(name: str) -> str:
    return files("profan.report.render.html").joinpath("assets", name).read_text(encoding="utf-8")


def _op_text(op: OpEntry) -> dict[str, Any]:
    """The table's cells as the terminal words them."""
    return {
        "measured": measured_lines(op),
        "ideal": ideal_lines(op),
        "wait": wait_lines(op),
        "flops": flops_lines(op),
        "bytes": bytes_lines(op),
        "sharding": sharding_lines(op),
    }


def page_data(report: Report, top: int) -> dict[str, Any]:
    return {"report": report.to_dict(), "text": [_op_text(op) for op in report.ops], "top": top}


def _script_json(data: dict[str, Any]) -> str:
    """JSON safe inside a <script> element (no ``</script>``, no ``<!--``)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")


def _ops_intro(report: Report) -> str:
    devices = max(report.summary.device_count, 1)
    no_hlo = bool(report.trace.hlo_missing)  # no ideal, bound or cost columns
    text = (
        f"{'Measured' if no_hlo else 'Measured, ideal, FLOPs and bytes'}: summed over all "
        f"{devices} devices and the op's n "
        "executions (n counts every device); % of all op time. Click a row for its detail."
    )
    async_words = async_legend(report.ops)
    if async_words:
        text += f" {async_words[0].upper()}{async_words[1:]}."
    legend = None if no_hlo else sources_legend(report.ops)
    return f"<p class='muted'>{escape(text)}" + (f" {escape(legend)}." if legend else "") + "</p>"


def render(report: Report, *, top: int = 20) -> str:
    path = str(report.trace.path)
    hosts = hosts_section(report)
    memory = memory_section(report)
    sections = {
        "timeline": "<section id='timeline'><h2>Timeline</h2><div id='tl-toolbar'></div>"
        "<div id='tl-wrap'><canvas id='tl-canvas' tabindex='0'></canvas></div>"
        "<div id='tl-status'></div>"
        "<noscript><p>The timeline, the op table and the charts need JavaScript.</p>"
        "</noscript></section>",
        "charts": "<section id='charts'><div class='chart-box'><h2>Roofline</h2><div id='roofline'>"
        "</div></div><div class='chart-box'><h2>Step time by bound</h2>"
        f"<div id='steps-chart'></div><p class='muted'>ideal per step: "
        f"{escape(seconds(report.summary.step_ideal_s))} (mean)</p></div></section>",
        "ops": f"<section id='ops'><h2>Ops ({len(report.ops)})</h2>{_ops_intro(report)}"
        "<div id='ops-filters'></div><div class='table-wrap'><table id='ops-table'></table>"
        "</div><div id='ops-more'></div></section>",
        "gemms": gemms_html(report),
        "memory": f"<section id='memory'>{memory}</section>" if memory else "",
        "hosts": f"<section id='hosts'>{hosts}</section>" if hosts else "",
        "findings": findings_html(report),
        "unmatched": unmatched_html(report),
    }
    # the navigation links the sections the page has, in the page's order
    nav = "".join(
        f"<a href='#{section.name}'>{section.title}</a>"
        for section in SECTIONS
        if sections.get(section.name)
    )
    scripts = "\n".join(asset(name) for name in SCRIPTS)
    return "\n".join(
        [
            "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
            # Nothing on this page may reach a network: no fetch, no image, no font from outside.
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; "
            "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<title>profan report: {escape(path)}</title>",
            f"<style>{asset(STYLE)}</style></head><body>",
            header_html(report),
            f"<nav>{nav}</nav><main>",
            *in_order(sections),
            "</main><aside id='detail' hidden aria-label='op detail'></aside>",
            "<div id='tip' hidden></div>",
            "<script type='application/json' id='profan-data'>"
            f"{_script_json(page_data(report, top))}</script>",
            f"<script>(function () {{\n'use strict';\n{scripts}\n}})();</script>",
            "</body></html>",
        ]
    )
