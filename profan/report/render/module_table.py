"""``profan hlo FILE --chip NAME``: the compile-time roofline of every op (``score_module``'s
records) as text, in the same units, column names and width-fitted layout as the report's op
table (``render``), and as ``--json`` writes them (``json_rows``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profan.report.format import seconds, si
from profan.report.model.codec import encode
from profan.report.render.layout import Column, Style, fit_columns, hidden_note, para, table

if TYPE_CHECKING:
    from profan.roofline import ModuleOpRecord

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


def _row(op: ModuleOpRecord) -> dict[str, list[str]]:
    return {
        "op": [op.name],
        "opcode": [op.opcode],
        "category": [op.category],
        "n": [("" if op.occurrences_exact else "~") + str(op.occurrences)],
        "ideal": [seconds(op.roofline_s)],
        "bound": [op.bound_by],
        "FLOPs": [si(float(op.flops)) if op.flops is not None else "unknown"],
        "HBM bytes": [si(float(op.hbm_bytes), "B")],
        "ICI bytes": [si(float(op.ici_bytes), "B")],
        "compute": [seconds(op.t_compute_s)],
        "HBM": [seconds(op.t_hbm_s)],
        "ICI": [seconds(op.t_ici_s)],
        "host": [seconds(op.t_host_s)],
    }


def render(
    ops: list[ModuleOpRecord], chip: str, *, top: int, width: int, style: Style
) -> list[str]:
    """The ``top`` ops by ideal time (``ops`` come longest first) as a table no wider than
    ``width``, with its legend."""
    shown = ops[:top]
    rows = [_row(op) for op in shown]
    with_host = any(op.t_host_s > 0 for op in shown)
    sep = 3 if style.colour else 2
    columns, widths = fit_columns(_columns(with_host), rows, width, sep, _DROP_ORDER)
    lines = [style(f"roofline on {chip}: top {len(rows)} of {len(ops)} ops by ideal time", "bold")]
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


def json_rows(ops: list[ModuleOpRecord]) -> list[dict[str, Any]]:
    """The records as ``profan hlo --json`` writes them: one object per op, its fields as keys
    in their order, every figure exact (a time of 3e-12 s stays 3e-12, where pandas' JSON
    writer, used before, rounded it to 0.0 at 10 decimals) and a figure that is not a finite
    number null (the report's own encoder, ``profan.report.model.codec.encode``)."""
    return [encode(op) for op in ops]
