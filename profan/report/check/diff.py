"""Two reports side by side: step time, categories, and the ops whose time changed most."""

from __future__ import annotations

from dataclasses import dataclass

from profan.escape import escaped, terminal
from profan.report.check.memory import diff_lines as memory_diff_lines
from profan.report.format import percent, seconds
from profan.report.keys import pair_ops
from profan.report.model import Report


@dataclass(slots=True)
class OpChange:
    key: str
    name_a: str | None
    name_b: str | None
    time_a_s: float
    time_b_s: float

    @property
    def delta_s(self) -> float:
        return self.time_b_s - self.time_a_s


def op_changes(a: Report, b: Report) -> list[OpChange]:
    """Every op of either report, paired by stable key, shape and source (``keys.pair_keys``),
    largest change first."""
    changes = []
    for op_a, op_b in pair_ops(a.ops, b.ops):
        changes.append(
            OpChange(
                op_a.key if op_a else op_b.key if op_b else "",
                op_a.label if op_a else None,
                op_b.label if op_b else None,
                op_a.measured_s if op_a else 0.0,
                op_b.measured_s if op_b else 0.0,
            )
        )
    changes.sort(key=lambda c: -abs(c.delta_s))
    return changes


def _ratio(a: float | None, b: float | None) -> str:
    if not a or b is None:
        return ""
    return f"{b / a - 1:+.1%}"


def render(
    a: Report,
    b: Report,
    *,
    top: int = 15,
    label_a: str = "A",
    label_b: str = "B",
    width: int = 160,
) -> str:
    """The comparison as text; an op's matching key goes to its own line when the line would
    be wider than ``width``."""
    a, b = escaped(a), escaped(b)  # names from the traces are data
    label_a, label_b = terminal(label_a), terminal(label_b)
    sa, sb = a.summary, b.summary
    lines = [f"profan diff\n  A: {label_a}\n  B: {label_b}", ""]
    rows = [
        ("steps", str(sa.step_count), str(sb.step_count), ""),
        (
            "step time (median)",
            seconds(sa.step_time_median_s),
            seconds(sb.step_time_median_s),
            _ratio(sa.step_time_median_s, sb.step_time_median_s),
        ),
        ("MFU", percent(sa.mfu), percent(sb.mfu), ""),
        (
            "exposed comm per device",
            seconds(sa.exposed_comm_s),
            seconds(sb.exposed_comm_s),
            _ratio(sa.exposed_comm_s, sb.exposed_comm_s),
        ),
        ("suspicious findings", str(len(a.findings)), str(len(b.findings)), ""),
        ("time by category, per device:", "", "", ""),
    ]
    categories = dict.fromkeys([*sa.time_by_category_s, *sb.time_by_category_s])
    for category in categories:
        ta = sa.time_by_category_s.get(category, 0.0)
        tb = sb.time_by_category_s.get(category, 0.0)
        rows.append(
            (
                f"  {category}",
                seconds(ta) if ta else "-",
                seconds(tb) if tb else "-",
                _ratio(ta, tb),
            )
        )
    width = max(len(r[0]) for r in rows)
    lines.append(f"{'':<{width}}  {'A':>12}  {'B':>12}  change")
    lines += [f"{r[0]:<{width}}  {r[1]:>12}  {r[2]:>12}  {r[3]}" for r in rows]
    lines += [
        "",
        "Ops whose time changed most (total over all devices; matched by scope, kind and shape "
        "across recompiles):",
    ]
    for change in op_changes(a, b)[:top]:
        if change.name_a is None:
            what = f"new in B: {change.name_b}"
        elif change.name_b is None:
            what = f"gone in B: {change.name_a}"
        elif change.name_a != change.name_b:
            what = f"{change.name_a} -> {change.name_b}"
        else:
            what = change.name_a
        line = (
            f"  {seconds(change.time_a_s) if change.name_a else '-':>10} -> "
            f"{seconds(change.time_b_s) if change.name_b else '-':>10}  "
            f"({'+' if change.delta_s >= 0 else '-'}{seconds(abs(change.delta_s))})  {what}"
        )
        key = f"[{change.key}]"
        if len(line) + 2 + len(key) <= width:
            lines.append(f"{line}  {key}")
        else:
            lines.append(line)
            lines.append(" " * 6 + key)
    lines += memory_diff_lines(a, b)
    return "\n".join(lines) + "\n"
