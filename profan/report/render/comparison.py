"""``profan diff`` beyond the terminal: what each side is (chip, devices, programs), and the
comparison as Markdown and as JSON data.  The numbers are ``profan.report.check.diff``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profan.report.check.diff import op_changes
from profan.report.format import percent, seconds
from profan.report.model import Report

# programs a side names before "and k more"
_PROGRAMS_NAMED = 3


@dataclass(frozen=True, slots=True)
class Side:
    """One report of a comparison, as the reader tells them apart."""

    label: str  # the path given
    chip: str
    devices: str  # ``8 × GPU (NVIDIA H100 80GB HBM3)``
    programs: list[str]  # by time, heaviest first

    def text(self) -> str:
        named = self.programs[:_PROGRAMS_NAMED]
        more = len(self.programs) - len(named)
        programs = ", ".join(named) + (f" and {more} more" if more > 0 else "")
        return f"chip {self.chip}, {self.devices}, programs {programs or '-'}"


def side(report: Report, label: str) -> Side:
    device = report.device
    kind = device.kind or "?"
    model = device.type
    devices = f"{device.count} × {kind}" + (f" ({model})" if model else "")
    time_of: dict[str, float] = {}
    for op in report.ops:
        program = op.program or op.module
        time_of[program] = time_of.get(program, 0.0) + op.measured_s
    programs = sorted(time_of, key=lambda name: -time_of[name])
    chip = report.chip.name or "?"
    return Side(label, chip, devices, programs)


def _figures(report: Report) -> dict[str, Any]:
    s = report.summary
    return {
        "steps": s.step_count,
        "step_time_median_s": s.step_time_median_s,
        "mfu": s.mfu,
        "exposed_comm_s": s.exposed_comm_s,
        "findings": len(report.findings),
        "time_by_category_s": s.time_by_category_s,
    }


def to_dict(a: Report, b: Report, *, top: int, label_a: str, label_b: str) -> dict[str, Any]:
    """The comparison as data: each side (what it is, its figures) and the ``top`` ops whose
    time changed most."""
    sides = {}
    for name, report, label in (("a", a, label_a), ("b", b, label_b)):
        what = side(report, label)
        sides[name] = {
            "path": label,
            "chip": what.chip,
            "devices": what.devices,
            "programs": what.programs,
            **_figures(report),
        }
    changes = [
        {
            "key": change.key,
            "name_a": change.name_a,
            "name_b": change.name_b,
            "time_a_s": change.time_a_s if change.name_a is not None else None,
            "time_b_s": change.time_b_s if change.name_b is not None else None,
            "delta_s": change.delta_s,
        }
        for change in op_changes(a, b)[:top]
    ]
    return {**sides, "op_changes": changes}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def markdown(a: Report, b: Report, *, top: int, label_a: str, label_b: str) -> str:
    """The comparison as Markdown: the sides, their figures, the ops that changed most."""
    side_a, side_b = side(a, label_a), side(b, label_b)
    sa, sb = a.summary, b.summary
    lines = [
        "# profan diff",
        "",
        f"- **A**: `{_cell(label_a)}`: {_cell(side_a.text())}",
        f"- **B**: `{_cell(label_b)}`: {_cell(side_b.text())}",
        "",
        "| | A | B |",
        "|---|---:|---:|",
        f"| chip | {_cell(side_a.chip)} | {_cell(side_b.chip)} |",
        f"| devices | {_cell(side_a.devices)} | {_cell(side_b.devices)} |",
        f"| steps | {sa.step_count} | {sb.step_count} |",
        f"| step time (median) | {seconds(sa.step_time_median_s)} | "
        f"{seconds(sb.step_time_median_s)} |",
        f"| MFU | {percent(sa.mfu)} | {percent(sb.mfu)} |",
        f"| exposed comm per device | {seconds(sa.exposed_comm_s)} | "
        f"{seconds(sb.exposed_comm_s)} |",
        f"| suspicious findings | {len(a.findings)} | {len(b.findings)} |",
        "",
        f"## Ops whose time changed most (top {top})",
        "",
        "| A | B | change | op |",
        "|---:|---:|---:|---|",
    ]
    for change in op_changes(a, b)[:top]:
        name = change.name_a or change.name_b or change.key
        if change.name_a and change.name_b and change.name_a != change.name_b:
            name = f"{change.name_a} -> {change.name_b}"
        sign = "+" if change.delta_s >= 0 else "-"
        lines.append(
            f"| {seconds(change.time_a_s) if change.name_a else '-'} | "
            f"{seconds(change.time_b_s) if change.name_b else '-'} | "
            f"{sign}{seconds(abs(change.delta_s))} | `{_cell(name)}` |"
        )
    return "\n".join(lines) + "\n"
