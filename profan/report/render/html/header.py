"""The page's header: the few figures a reader takes in at a glance, the rest one click away.

Worded as the terminal report words them (``profan.report.format``), so the two never disagree.
"""

from __future__ import annotations

from collections import Counter
from html import escape

from profan.report.analysis.notes import HEADING as NOTES_HEADING
from profan.report.analysis.notes import more_text, notes_shown
from profan.report.format import (
    comm_text,
    idle_text,
    mfu_text,
    percent,
    seconds,
    si,
    step_share_text,
)
from profan.report.model import Report
from profan.report.rules.savings import ranked


def _card(title: str, value: str, detail: str, tone: str = "") -> str:
    classes = f"card tone-{tone}" if tone else "card"
    return (
        f"<div class='{classes}'><div class='card-title'>{escape(title)}</div>"
        f"<div class='card-value'>{escape(value)}</div>"
        f"<div class='card-detail'>{escape(detail)}</div></div>"
    )


def _tone(share: float | None, bad: float, warn: float, *, high_is_bad: bool) -> str:
    if share is None:
        return ""
    if high_is_bad:
        return "bad" if share > bad else "warn" if share > warn else "ok"
    return "bad" if share < bad else "warn" if share < warn else "ok"


def _findings_detail(report: Report) -> str:
    """The rules in the order of their largest saving (``profan.report.rules.savings``), the first
    naming its op and what fixing it would save."""
    findings = ranked(report.findings)
    if not findings:
        return "none of the rules fired"
    rules = Counter(f.rule for f in findings)
    order = list(dict.fromkeys(f.rule for f in findings))
    top = findings[0]
    share = (
        f"{percent(top.saving_share)} of the time"
        if top.saving_share is not None
        else f"{percent(top.saving_memory_share)} of memory"
        if top.saving_memory_share is not None
        else None
    )
    lead = f" ({top.name} saves {share})" if share and top.name else ""
    parts = [f"{rule} ×{rules[rule]}" + (lead if i == 0 else "") for i, rule in enumerate(order)]
    return ", ".join(parts[:3]) + (", …" if len(parts) > 3 else "")


def _cards(report: Report) -> list[str]:
    s = report.summary
    cards = []
    if s.step_count:
        cards.append(
            _card(
                "step time (median)",
                seconds(s.step_time_median_s),
                f"{s.step_count} steps: min {seconds(s.step_time_min_s)}, p90 "
                f"{seconds(s.step_time_p90_s)}, max {seconds(s.step_time_max_s)}",
            )
        )
    no_hlo = bool(report.trace.hlo_missing)  # no FLOPs, no roofline: the header says so
    ideal, measured = s.step_ideal_s, s.step_measured_s
    share_text = step_share_text(ideal, measured)
    if no_hlo:
        pass
    elif share_text is not None and ideal is not None and measured is not None:
        share = ideal / measured if ideal <= measured else None
        cards.append(
            _card(
                "step vs its roofline",
                percent(share) if share is not None else "n/a",
                share_text,
                _tone(share, 0.3, 0.6, high_is_bad=False),
            )
        )
    else:
        cards.append(
            _card(
                "ideal vs measured",
                seconds(s.ideal_time_s),
                f"ideal (roofline) vs {seconds(s.total_op_time_s / max(s.device_count, 1))} "
                "measured op time, per device",
            )
        )
    mfu = mfu_text(s.mfu, s.scorer.get("mfu_peak_dtype"), s.scorer.get("mfu_peak_source"))
    if not no_hlo:
        cards.append(_card("MFU", percent(s.mfu) if s.mfu is not None and s.mfu <= 1 else "-", mfu))
    cards.append(
        _card(
            "exposed communication",
            percent(s.exposed_comm_share),
            comm_text(s),
            _tone(s.exposed_comm_share, 0.25, 0.1, high_is_bad=True),
        )
    )
    idle_share = s.idle_s / s.busy_span_s if s.busy_span_s > 0 else None
    cards.append(
        _card(
            "idle",
            percent(idle_share),
            f"of the busy span; {idle_text(s, report.steps)}",
            _tone(idle_share, 0.25, 0.1, high_is_bad=True),
        )
    )
    cards.append(
        _card(
            "findings",
            str(len(report.findings)),
            _findings_detail(report),
            "bad" if report.findings else "ok",
        )
    )
    return cards


def _bound_bar(report: Report) -> str:
    """Time by bound per device as one stacked bar, each part labelled with its share."""
    bounds = {k: v for k, v in report.summary.time_by_bound_s.items() if v > 0}
    if report.trace.hlo_missing:  # joined to no HLO: every op's bound is unknown
        return _category_line(report)
    total = sum(bounds.values())
    if total <= 0:
        return ""
    parts = []
    for bound, value in bounds.items():
        share = value / total
        label = f"{bound} {percent(share, 0)}" if share >= 0.06 else ""
        parts.append(
            f"<span class='bound-part b-{escape(bound)}' style='flex-grow:{share:.6f};"
            f"background:var(--b-{escape(bound)}, var(--b-other))' "
            f"title='{escape(bound)}: {seconds(value)} per device ({percent(share)})'>"
            f"{escape(label)}</span>"
        )
    return (
        "<div class='bound-row'><span class='bound-label'>time by bound (per device, whole "
        "trace)</span>"
        f"<div class='bound-bar'>{''.join(parts)}</div></div>{_category_line(report)}"
    )


def _category_line(report: Report) -> str:
    categories = report.summary.time_by_category_s
    category_total = sum(categories.values()) or 1.0
    category_text = ", ".join(
        f"{k} {seconds(v)} ({percent(v / category_total, 0)})" for k, v in categories.items()
    )
    return (
        f"<div class='category-line'><b>time by category</b> per device, whole trace: "
        f"{escape(category_text)}</div>"
    )


def _notes(report: Report) -> str:
    """Per-step notes and the scorer's accounting, collapsed to one line with a count."""
    noted = [(step.step, str(step.note)) for step in report.steps if step.note]
    parts = []
    accounting = report.summary.scorer.get("accounting_note")
    if accounting:
        parts.append(
            f"<div class='note-line'><b>accounting</b> "
            f"{escape(str(report.summary.scorer.get('accounting', '')))}: "
            f"{escape(str(accounting))}</div>"
        )
    if noted:
        distinct = Counter(note for _, note in noted)
        common, times = distinct.most_common(1)[0]
        summary = f"notes on {len(noted)} of {len(report.steps)} steps" + (
            f" (e.g. step {noted[0][0]}: {noted[0][1]})" if times < len(noted) else f": {common}"
        )
        items = "".join(
            f"<li><a href='#timeline' data-step='{step}'>step {step}</a>: {escape(note)}</li>"
            for step, note in noted
        )
        parts.append(
            f"<details class='step-notes'><summary>{escape(summary)}</summary>"
            f"<ul>{items}</ul></details>"
        )
    return "".join(parts)


def _trace_notes(report: Report) -> str:
    """The readers' notes (where the measured side came from), collapsed to their count."""
    notes, rest = notes_shown(report)
    if not notes:
        return ""
    items = "".join(f"<li>{escape(note)}</li>" for note in notes)
    items += f"<li>{escape(more_text(rest))}</li>" if rest else ""
    count = len(notes) + rest
    return (
        f"<details class='step-notes trace-notes'><summary>{escape(NOTES_HEADING)}: {count}"
        f"</summary><ul>{items}</ul></details>"
    )


def _no_hlo(report: Report) -> str:
    """The one line saying the ops were joined to no HLO, and what to pass (empty when they
    were)."""
    missing = report.trace.hlo_missing
    partial = report.trace.devices_partial
    return (
        f"<div class='note-line no-hlo'><b>HLO</b> {escape(str(missing))}</div>" if missing else ""
    ) + (f"<div class='note-line'><b>devices</b> {escape(str(partial))}</div>" if partial else "")


def header_html(report: Report) -> str:
    s, d, chip = report.summary, report.device, report.chip
    path = str(report.trace.path)
    hosts = len(d.hosts)
    facts = [
        f"{d.count} × {d.type or d.kind} ({d.kind}, {hosts} host(s))",
        f"chip {chip.name or '?'}: {si(chip.peak_flops_per_s, 'FLOP/s')}, HBM "
        f"{si(chip.hbm_bytes_per_s_device, 'B/s')} per device [source: "
        f"{chip.source}]",
        *(
            f"mesh {module}: " + " × ".join(f"{name}={size}" for name, size in axes.items())
            for module, axes in s.mesh.items()
            if axes
        ),
    ]
    return (
        "<header id='top'>"
        f"<h1>profan report <code class='path'>{escape(path)}</code></h1>"
        f"{_no_hlo(report)}"
        f"<div class='facts'>{' · '.join(escape(fact) for fact in facts)}</div>"
        f"<div class='cards'>{''.join(_cards(report))}</div>"
        f"{_bound_bar(report)}{_notes(report)}{_trace_notes(report)}</header>"
    )
