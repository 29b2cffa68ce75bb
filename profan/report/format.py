"""Human formatting of times, counts and byte sizes (shared by every renderer)."""

from __future__ import annotations

import math

from profan.report.model import Finding


def seconds(value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    magnitude = abs(value)
    if magnitude == 0:
        return "0 s"
    if magnitude >= 1:
        return f"{value:.3g} s"
    if magnitude >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    if magnitude >= 1e-6:
        return f"{value * 1e6:.3g} µs"
    return f"{value * 1e9:.3g} ns"


def si(value: float | None, unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if value == 0:
        return f"0{unit}"
    for factor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{prefix}{unit}"
    return f"{value:.3g}{unit}"


def percent(value: float | None) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if 0 < value < 0.0005:  # "0.0%" would read as none at all
        return "<0.1%"
    return f"{value:.1%}"


def wrap_name(name: str, width: int, separators: str = "._-/") -> list[str]:
    """Split a long HLO name at its separators (``.``, ``_``, ``-``, ``/``) to fit ``width``."""
    if len(name) <= width:
        return [name]
    lines: list[str] = []
    current = ""
    token = ""
    for char in name:
        token += char
        if char in separators:
            if len(current) + len(token) > width and current:
                lines.append(current)
                current = ""
            current += token
            token = ""
    if token:
        if len(current) + len(token) > width and current:
            lines.append(current)
            current = ""
        current += token
    lines.append(current)
    out: list[str] = []
    for line in lines:  # pieces with no separator at all: hard split
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return out


def grouped_findings(findings: list[Finding]) -> list[tuple[str | None, list[Finding]]]:
    """Findings grouped for display: whole-profile findings (no op) first under ``None``, then
    one group per op in the order the op first appears (heaviest first)."""
    profile = [f for f in findings if not f.op]
    by_op: dict[str, list[Finding]] = {}
    for f in findings:
        if f.op:
            by_op.setdefault(f.op, []).append(f)
    groups: list[tuple[str | None, list[Finding]]] = [(None, profile)] if profile else []
    groups.extend(by_op.items())
    return groups
