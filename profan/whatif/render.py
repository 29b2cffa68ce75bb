"""A ``Projection`` as terminal text, Markdown, JSON and a standalone HTML page."""

from __future__ import annotations

import html
import json
from dataclasses import asdict

from profan.units import seconds as format_seconds
from profan.whatif.project import Projection


def _t(seconds: float | None) -> str:
    return "-" if seconds is None else format_seconds(seconds)


def _header(p: Projection) -> list[str]:
    share = p.projected_step_s / p.step_s - 1 if p.step_s > 0 else 0.0
    fixed = p.parameters["fixed_s"]
    return [
        f"profan whatif: {p.trace} ({p.source_chip}) -> {p.target}",
        f"step      measured {_t(p.step_s)} on {p.source_chip}; projected {_t(p.projected_step_s)}"
        f" on {p.target_chip} ({share:+.1%}), range {_t(p.step_low_s)} - {_t(p.step_high_s)}"
        f" (+-{p.parameters['step_residual']:.0%}: the model's largest step residual)",
        f"busy      per device per step: {_t(p.busy_s)} measured -> {_t(p.projected_busy_s)}"
        " projected (each op: fixed + (t - fixed) x (1 - s + s x R'/R), s its share that scales)",
        f"idle      {p.step_rule}",
        f"model     fixed {fixed * 1e6:.2f} us per kernel launch; knee {p.parameters['knee']}; "
        "sustained fractions "
        + "; ".join(
            f"{chip} compute {v['compute']:.3f} hbm {v['hbm']:.3f} ici {v['ici']:.3f}"
            for chip, v in p.parameters["sustained"].items()
        )
        + f"  [{p.parameters['fitted_on']}]",
        *(f"note      {note}" for note in p.notes),
    ]


def _changed(p: Projection) -> list[str]:
    return [
        f"{op.name} ({op.source_bound} -> {op.target_bound})" for op in p.ops if op.changes_bound
    ]


def terminal(p: Projection, top: int = 20) -> str:
    lines = _header(p)
    if len(p.programs) > 1:
        lines += ["", "programs  per device per step: measured -> projected"]
        for name, (measured, projected) in sorted(p.programs.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"  {name:<40} {_t(measured):>10} -> {_t(projected):>10}")
    lines += ["", f"Top {min(top, len(p.ops))} ops of {len(p.ops)} by projected time (all "
              "devices, all executions)"]  # fmt: skip
    head = f"{'op':<36} {'n':>5} {'measured':>10} {'projected':>10} {'range':>21}  bound   rests on"
    lines += [head, "-" * len(head)]
    for op in p.ops[:top]:
        bound = op.source_bound if not op.changes_bound else f"{op.source_bound}->{op.target_bound}"
        lines.append(
            f"{op.name[:36]:<36} {op.executions:>5} {_t(op.measured_s):>10} "
            f"{_t(op.projected_s):>10} {_t(op.low_s):>10}-{_t(op.high_s):<10}  {bound:<7} "
            f"{op.rests_on}"
        )
    changed = _changed(p)
    lines += ["", f"ops that change bound: {', '.join(changed) if changed else 'none'}"]
    return "\n".join(lines) + "\n"


def markdown(p: Projection, top: int = 20) -> str:
    out = [f"## profan whatif: `{p.trace}` ({p.source_chip}) -> {p.target}", ""]
    out += [f"- {line.split(None, 1)[1]}" for line in _header(p)[1:]]
    out += ["", "| op | n | measured | projected | range | bound | rests on |"]
    out += ["|---|---|---|---|---|---|---|"]
    for op in p.ops[:top]:
        bound = f"{op.source_bound} -> {op.target_bound}" if op.changes_bound else op.source_bound
        out.append(
            f"| `{op.name}` | {op.executions} | {_t(op.measured_s)} | {_t(op.projected_s)} | "
            f"{_t(op.low_s)} - {_t(op.high_s)} | {bound} | {op.rests_on} |"
        )
    return "\n".join(out) + "\n"


def to_dict(p: Projection) -> dict:
    data = asdict(p)
    data["programs"] = {k: {"measured_s": v[0], "projected_s": v[1]} for k, v in p.programs.items()}
    for op, row in zip(p.ops, data["ops"], strict=True):
        row["changes_bound"] = op.changes_bound
    return data


def to_json(p: Projection) -> str:
    return json.dumps(to_dict(p), indent=1, ensure_ascii=False) + "\n"


def to_html(p: Projection, top: int = 50) -> str:
    rows = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(str(v))}</td>"
            for v in (
                op.name,
                op.executions,
                _t(op.measured_s),
                _t(op.projected_s),
                f"{_t(op.low_s)} - {_t(op.high_s)}",
                f"{op.source_bound} -> {op.target_bound}",
                op.rests_on,
            )
        )
        + "</tr>"
        for op in p.ops[:top]
    )
    header = "".join(f"<li>{html.escape(line)}</li>" for line in _header(p)[1:])
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>profan whatif</title></head>"
        f"<body><h1>{html.escape(_header(p)[0])}</h1><ul>{header}</ul><table border='1'>"
        "<tr><th>op</th><th>n</th><th>measured</th><th>projected</th><th>range</th>"
        f"<th>bound</th><th>rests on</th></tr>{rows}</table></body></html>\n"
    )
