"""The cross-host section of a report: per host, per step, stragglers (``profan.trace.hosts``).

JSON (SCHEMA.md "hosts"): a top-level ``hosts`` list, one entry per host (``host``,
``devices``, ``step_time_median_s``, ``step_time_p90_s``, ``late_s`` per step against the median
host, ``late_median_s``, ``arrival_late_s``, ``clock_offset_s``, ``idle_share``, ``straggler``)
and ``cross_host`` (``steps``, ``skew_s`` and ``wait_s`` per step, ``max_skew_s``,
``stragglers``, ``alignment``, ``shared_collectives``).  Both are absent for one host.  A
straggler gets a ``straggler-host`` finding naming it (``host``); ``profan check`` has the budget
``max_host_skew_s``.
"""

from __future__ import annotations

import html as html_lib
import textwrap
from typing import Any

from profan.report.format import seconds
from profan.report.model import CrossHost, Finding, HostEntry, Report

STRAGGLER_RULE = "straggler-host"


def hosts_section(profile: Any) -> tuple[list[HostEntry], CrossHost | None]:
    """(``hosts`` entries, ``cross_host`` facts) of a profile; empty and None for one host."""
    analysis = getattr(profile, "hosts", None)
    if analysis is None:
        return [], None
    hosts = [
        HostEntry(
            host=row.host,
            devices=row.devices,
            step_time_median_s=row.step_time_median_s,
            step_time_p90_s=row.step_time_p90_s,
            late_s=[row.late_s[s] for s in sorted(row.late_s)],
            late_median_s=row.late_median_s,
            arrival_late_s=[row.arrival_late_s[s] for s in sorted(row.arrival_late_s)],
            clock_offset_s=row.clock_offset_s,
            idle_share=row.idle_share,
            straggler=row.straggler,
        )
        for row in analysis.hosts
    ]
    cross = CrossHost(
        steps=analysis.steps,
        skew_s=[analysis.skew_s[s] for s in analysis.steps],
        wait_s=[analysis.wait_s.get(s, 0.0) for s in analysis.steps],
        max_skew_s=analysis.max_skew_s,
        stragglers=analysis.stragglers,
        alignment=analysis.alignment,
        shared_collectives=analysis.shared_collectives,
    )
    return hosts, cross


def _waited(cross: CrossHost) -> float:
    """Time the hosts spent waiting in shared collectives, over the profile."""
    return sum(value or 0.0 for value in cross.wait_s)


def straggler_findings(report: Report) -> list[Finding]:
    """One ``straggler-host`` finding per straggler, with the time the others waited."""
    cross = report.cross_host
    if cross is None:
        return []
    waited = _waited(cross)
    found = []
    for entry in report.hosts:
        if not entry.straggler:
            continue
        steps = len(entry.late_s)
        found.append(
            Finding(
                rule=STRAGGLER_RULE,
                message=(
                    f"host {entry.host} starts steps {seconds(entry.late_median_s)} late "
                    f"(median over {steps} steps, against the median host); the other hosts "
                    f"waited {seconds(waited)} in shared collectives over the profile"
                ),
                look_at=(
                    "that host's input pipeline, host-side work between steps, or its "
                    "hardware; the others idle in collectives until it arrives"
                ),
                time_s=float(waited),
                host=str(entry.host),
            )
        )
    return found


def host_checks(
    report: Report, max_host_skew_s: float | None
) -> list[tuple[str, bool, str, str | None]]:
    """``[budget] max_host_skew_s`` as (name, passed, message, source) for ``profan check``."""
    if max_host_skew_s is None:
        return []
    cross = report.cross_host
    if cross is None:
        return [
            (
                "host_skew",
                True,
                f"one host: no skew between hosts (budget {seconds(max_host_skew_s)})",
                None,
            )
        ]
    skew = float(cross.max_skew_s or 0.0)
    stragglers = ", ".join(cross.stragglers) or "none"
    return [
        (
            "host_skew",
            skew <= max_host_skew_s,
            f"largest step skew between hosts {seconds(skew)} (budget "
            f"{seconds(max_host_skew_s)}; stragglers: {stragglers})",
            None,
        )
    ]


def _rows(report: Report) -> list[tuple[str, str, str, str, str]]:
    rows = []
    for entry in report.hosts:
        rows.append(
            (
                str(entry.host),
                str(len(entry.devices)),
                seconds(entry.step_time_median_s),
                seconds(entry.late_median_s),
                "straggler" if entry.straggler else "",
            )
        )
    return rows


def _cross(report: Report) -> CrossHost:
    """The cross-host facts (empty where a report has hosts but lacks them)."""
    return report.cross_host or CrossHost()


def _headline(report: Report) -> str:
    cross = _cross(report)
    skew = seconds(cross.max_skew_s)
    waited = seconds(_waited(cross))
    stragglers = ", ".join(cross.stragglers) or "none"
    return (
        f"{len(report.hosts)} hosts; largest step skew {skew}; stragglers: {stragglers}; time "
        f"waited in shared collectives: {waited}"
    )


def terminal_lines(report: Report, width: int = 100) -> list[str]:
    """The section for the terminal (empty for one host); no line wider than ``width``."""
    if not report.hosts:
        return []
    lines = ["Hosts (late = step start against the median host, clocks aligned)"]
    lines += textwrap.wrap(_headline(report), width, initial_indent="  ", subsequent_indent="  ")
    lines += textwrap.wrap(
        _cross(report).alignment, width, initial_indent="  ", subsequent_indent="  "
    )
    header = ("host", "devices", "step median", "late median", "")
    table = [header, *_rows(report)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table[:40]:
        text = "  " + "  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in
                                enumerate(zip(row, widths, strict=True)))  # fmt: skip
        lines.append(text.rstrip()[:width])
    if len(table) > 40:
        lines.append(f"  ... {len(table) - 40} more hosts (JSON has them all)")
    return [*lines, ""]


def markdown_lines(report: Report) -> list[str]:
    if not report.hosts:
        return []
    lines = [
        "## Hosts",
        "",
        _headline(report) + ".",
        "",
        _cross(report).alignment + ".",
        "",
        "| host | devices | step median | late median | |",
        "|---|---:|---:|---:|---|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(report)]
    return [*lines, ""]


def _cell_colour(late: float | None, scale: float) -> str:
    """White at on time, red when late by ``scale`` or more, blue when early."""
    if late is None or scale <= 0:
        return "#eeeeee"
    share = max(-1.0, min(1.0, late / scale))
    fade = int(255 * (1 - abs(share)))
    return f"rgb(255,{fade},{fade})" if share >= 0 else f"rgb({fade},{fade},255)"


def html_section(report: Report) -> str:
    """Headline, per-host table and a host x step heat map of lateness."""
    if not report.hosts:
        return ""
    e = html_lib.escape
    cross = _cross(report)
    steps = cross.steps
    lates = [v for entry in report.hosts for v in entry.late_s if v is not None]
    scale = max((abs(v) for v in lates), default=0.0)
    parts = [
        "<h2>Hosts</h2>",
        f"<p>{e(_headline(report))}<br>{e(cross.alignment)}</p>",
        "<table class='heatmap'><tr><th>host</th><th>step median</th>",
    ]
    parts += [f"<th>{e(str(step))}</th>" for step in steps]
    parts.append("</tr>")
    for entry in report.hosts:
        parts.append(
            f"<tr><td class='name'>{e(str(entry.host))}</td>"
            f"<td class='num'>{e(seconds(entry.step_time_median_s))}</td>"
        )
        for step, late in zip(steps, entry.late_s, strict=False):
            parts.append(
                f"<td class='num' style='background:{_cell_colour(late, scale)}' "
                f"data-step='{e(str(step))}' data-host='{e(str(entry.host))}' "
                f"title='step {e(str(step))}: late {e(seconds(late))}'>{e(seconds(late))}</td>"
            )
        parts.append("</tr>")
    parts.append("</table><p>cells: how late the host started the step against the median host")
    parts.append(" (red: late, blue: early; full colour = the largest lateness).</p>")
    return "".join(parts)
