"""HLO text with each op's measured/ideal time, bound and flags as trailing comments."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from profan.errors import ConfigError
from profan.escape import escaped, terminal
from profan.hlo.model import Module
from profan.hlo.printer import module_to_text
from profan.report.format import percent, seconds
from profan.report.model import OpEntry, Report
from profan.report.render.terminal import ideal_lines, measured_lines, wait_lines

_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%?([A-Za-z0-9_.\-]+)\s*=")


def pick_module(report: Report, profile: Any, name: str | None) -> tuple[str, Module]:
    """The module named (trace name or key), or the one where the most time went."""
    keys = {str(k): m for k, m in profile.modules.items()}
    names = {m.name: k for k, m in keys.items()}
    if name is not None:
        if name in keys:
            return name, keys[name]
        if name in names:
            return names[name], keys[names[name]]
        known = ", ".join(sorted(names)) or "none"
        raise ConfigError(f"no module {name!r} in this profile (modules: {known})")
    time_by_module: dict[str, float] = defaultdict(float)
    for op in report.ops:
        time_by_module[op.program or op.module] += op.measured_s
    for module_name, _ in sorted(time_by_module.items(), key=lambda kv: -kv[1]):
        if module_name in keys:
            return module_name, keys[module_name]
        if module_name in names:
            return names[module_name], keys[names[module_name]]
    if keys:
        key = next(iter(keys))
        return key, keys[key]
    raise ConfigError("the profile holds no HLO modules to annotate")


def comment_for(op: OpEntry) -> str:
    bound = {
        "async-start": "issues an async op (scored on its -done)",
        "unknown": "no cost model",
    }.get(op.bound_by, f"{op.bound_by}-bound")
    if op.exposed_wait_s is None:
        parts = [
            f"measured {seconds(op.measured_s)} over {op.occurrences} executions (all devices)",
            f"ideal {seconds(op.roofline_s)}",
        ]
    else:  # an async done: the transfer's verdict (the table's cells), then its wait
        parts = [
            f"measured {' '.join(measured_lines(op))} (its transfers, start to done)",
            f"ideal {' '.join(ideal_lines(op))}",
        ]
    parts.append(bound)
    if op.efficiency is not None:
        parts.append(f"eff {percent(op.efficiency)}")
    if op.exposed_wait_s is not None:
        parts.append(
            f"wait {' '.join(wait_lines(op))} over {op.occurrences} executions (all devices)"
        )
    if op.flags:
        parts.append("FLAGS: " + ",".join(op.flags))
    return "  // profan: " + ", ".join(parts)


def annotate(text: str, ops: list[OpEntry]) -> str:
    by_name = {op.name: op for op in ops}
    out = []
    for line in text.splitlines():
        match = _DEFINITION.match(line)
        op = by_name.get(match.group(1)) if match else None
        out.append(line + comment_for(op) if op is not None else line)
    return "\n".join(out) + "\n"


def source_summary(ops: list[OpEntry]) -> str:
    """``file:line  total time  flags``, the heaviest line first."""
    totals: dict[str, float] = defaultdict(float)
    flags: dict[str, set[str]] = defaultdict(set)
    for op in ops:
        source = op.source or "<no source line>"
        totals[source] += op.measured_s
        flags[source].update(op.flags)
    width = max((len(s) for s in totals), default=10)
    lines = ["// per source line: file:line  total time (all devices)  flags"]
    for source, total in sorted(totals.items(), key=lambda kv: -kv[1]):
        lines.append(
            f"// {source:<{width}}  {seconds(total):>10}  {','.join(sorted(flags[source]))}"
        )
    return "\n".join(lines) + "\n"


def render(report: Report, profile: Any, module_name: str | None = None) -> str:
    key, module = pick_module(report, profile, module_name)
    report = escaped(report)  # names from the trace are data: no control character passes
    # the program's own ops (several programs may share a module name)
    ops = [op for op in report.ops if (op.program or op.module) in (key, module.name)]
    ops = [op for op in ops if op.program in (None, key)]
    header = f"// profan annotate: module {module.name} ({len(ops)} ops measured)\n"
    text = header + annotate(module_to_text(module), ops) + "\n" + source_summary(ops)
    # The module's own names (printed by the HLO printer) reach the terminal too: no control
    # character passes (a newline inside a name still breaks its line: the printer's to mend).
    return "\n".join(terminal(line) for line in text.split("\n"))
