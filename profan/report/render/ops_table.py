"""The report's ops as a table: a pandas DataFrame (``profan.Report.ops``) and CSV
(``profan report --format csv``).

One row per op, in the report's order; the columns are the JSON report's op fields (SCHEMA.md,
``ops[]``), with the same values: what the JSON holds as null is missing here (NaN, <NA>).
Lists and objects (``flags``, ``collective``, ``bytes_by_space``, ...) stay Python lists and
dicts in the frame and are written as JSON text in the CSV, so a reader gets them back whole.
Beside ``kernels`` (GPU), ``kernel_summary`` is the list as compact text, heaviest first:
``name×count; name×count`` (``profan.report.analysis.kernels.kernel_summary``; missing without
kernels).
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from profan.report.analysis.kernels import kernel_summary
from profan.report.model import OpEntry, Report

if TYPE_CHECKING:
    import pandas as pd

# text that repeats across rows: categorical; the rest of the text: pandas strings
_CATEGORICAL = {"module", "opcode", "category", "bound_by", "flops_source", "bytes_source", "peak"}
_CATEGORICAL |= {"program"}


def _dtype(name: str, annotation: str) -> str:
    if annotation in ("float", "float | None"):
        return "float64"
    if annotation == "int":
        return "int64"
    if annotation == "int | None":
        return "Int64"
    if annotation in ("str", "str | None"):
        return "category" if name in _CATEGORICAL else "string"
    return "object"  # lists and dicts


# Columns beside the JSON op fields, made from them: the kernel list as compact text.
DERIVED_COLUMNS = ("kernel_summary",)

# column -> dtype, in the JSON op's field order
OP_TABLE_DTYPES: dict[str, str] = {
    item.name: _dtype(item.name, str(item.type)) for item in dataclasses.fields(OpEntry)
}


def ops_frame(report: Report) -> pd.DataFrame:
    """One row per op of ``report`` (in its order), the JSON op fields as typed columns."""
    import pandas as pd

    records = report.to_dict()["ops"]  # the JSON's values: non-finite numbers are null there
    columns: dict[str, Any] = {}
    for name, dtype in OP_TABLE_DTYPES.items():
        values = [record.get(name) for record in records]
        if dtype == "object":
            columns[name] = pd.Series(values, dtype="object")
        elif dtype == "float64":
            columns[name] = pd.Series(
                [float("nan") if v is None else v for v in values], dtype="float64"
            )
        else:
            columns[name] = pd.Series(values, dtype=dtype)
        if name == "kernels":
            summaries = [kernel_summary(v, limit=0, width=0) or None for v in values]
            columns["kernel_summary"] = pd.Series(summaries, dtype="string")
    return pd.DataFrame(columns)


def ops_csv(report: Report) -> str:
    """``ops_frame`` as CSV text: a header row, then one row per op; missing values are empty,
    lists and dicts JSON text."""
    frame = ops_frame(report)
    for name, dtype in OP_TABLE_DTYPES.items():
        if dtype == "object":
            frame[name] = [None if v is None else json.dumps(v) for v in frame[name]]
    return frame.to_csv(index=False, lineterminator="\n")
