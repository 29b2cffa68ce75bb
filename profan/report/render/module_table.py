"""``profan hlo FILE --chip NAME`` as text: the compile-time roofline of every op, in the same
units, column names and width-fitted layout as the report's op table."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from profan.report.format import seconds, si
from profan.report.render.layout import Column, Style, fit_columns, hidden_note, para, table

# Dropped in this order while the table does not fit (after the op name wraps).
_DROP_ORDER = (("compute", "HBM", "ICI", "host"), ("opcode",), ("ICI bytes",), ("FLOPs",))


def _columns(with_host: bool) -> list[Column]:
    return [
        Column("op", wrap="name", cap=40, min_width=14),
        Column("opcode"),
        Column("category"),
        Column("n", right=True),
        Column("ideal", right=True),
        Column("bound"),
        Column("FLOPs", right=True),
        Column("HBM bytes", right=True),
        Column("ICI bytes", right=True),
        Column("compute", right=True),
        Column("HBM", right=True),
        Column("ICI", right=True),
        *([Column("host", right=True)] if with_host else []),
    ]


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _row(record: dict[str, Any]) -> dict[str, list[str]]:
    exact = bool(record.get("occurrences_exact", True))
    flops = _number(record.get("flops"))
    return {
        "op": [str(record["name"])],
        "opcode": [str(record.get("opcode") or "")],
        "category": [str(record.get("category") or "")],
        "n": [("" if exact else "~") + str(int(record.get("occurrences") or 0))],
        "ideal": [seconds(_number(record.get("roofline_s")))],
        "bound": [str(record.get("bound_by") or "")],
        "FLOPs": [si(flops) if flops is not None else "unknown"],
        "HBM bytes": [si(_number(record.get("hbm_bytes")), "B")],
        "ICI bytes": [si(_number(record.get("ici_bytes")), "B")],
        "compute": [seconds(_number(record.get("t_compute_s")))],
        "HBM": [seconds(_number(record.get("t_hbm_s")))],
        "ICI": [seconds(_number(record.get("t_ici_s")))],
        "host": [seconds(_number(record.get("t_host_s")))],
    }


def render(frame: pd.DataFrame, chip: str, *, top: int, width: int, style: Style) -> list[str]:
    """The ``top`` ops by ideal time as a table no wider than ``width``, with its legend."""
    shown = frame.head(top)
    rows = [_row(record) for record in shown.to_dict("records")]
    with_host = bool((pd.to_numeric(shown.get("t_host_s"), errors="coerce") > 0).any())
    sep = 3 if style.colour else 2
    columns, widths = fit_columns(_columns(with_host), rows, width, sep, _DROP_ORDER)
    lines = [
        style(f"roofline on {chip}: top {len(rows)} of {len(frame)} ops by ideal time", "bold")
    ]
    terms = "compute, HBM, ICI" + (", host" if with_host else "")
    legend = (
        "per device, summed over the op's n executions (a loop body's ops once per trip); "
        f"ideal = max({terms}) time; HBM bytes: read and written; ICI bytes: sent over the "
        "interconnect"
    )
    if any(row["n"][0].startswith("~") for row in rows):
        legend += "; ~n: a lower bound (unknown trip count, or the op is in a conditional branch)"
    if any(row["FLOPs"] == ["unknown"] for row in rows):
        legend += "; FLOPs unknown: profan has no cost model for the op"
    lines.extend(style(line, "dim") for line in para(legend, width, hang=2))
    lines.extend(table(columns, [[row[c.header] for c in columns] for row in rows], widths, style))
    hidden = [c.header for c in _columns(with_host) if c.header not in {x.header for x in columns}]
    lines.extend(
        hidden_note(hidden, width, style, "widen the terminal, set COLUMNS, or use --json")
    )
    return lines
