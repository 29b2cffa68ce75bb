"""Which ops a report lists and in what order: ``profan report --filter EXPR --sort COLUMN``.

A filter is ``KEY=VALUE`` or bare text:

* ``category=matmul``, ``bound=hbm``, ``opcode=fusion``: the op's field equals the value;
* ``flag=exposed-collective``: the op carries that flag;
* ``program=jit_train_step``: the op's program, by name (``jit_train_step``) or key
  (``jit_train_step(42)``);
* bare text (``attention``): in the op's name or its source line (``model.py:12``).

Values are compared without regard to case; several filters must all hold.  A sort key is a
column of the op table (``measured``, ``ideal``, ``eff``, ``n``, ``FLOPs``, ``bytes``, ...) or
any numeric or text field of the JSON op (``exposed_s``); numbers sort largest first and text
A to Z, ``COLUMN:asc`` or ``COLUMN:desc`` says otherwise.  Ops without the value go last.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from profan.errors import ConfigError
from profan.report.keys import base_name
from profan.report.model import OpEntry, Report

# filter key -> the OpEntry field it compares (``flag`` and ``program`` are matched apart)
_FIELD_FILTERS = {"category": "category", "bound": "bound_by", "opcode": "opcode"}
FILTER_KEYS = (*_FIELD_FILTERS, "flag", "program")

# the op table's column names -> the OpEntry field they show
SORT_ALIASES = {
    "measured": "measured_s",
    "time": "measured_s",
    "ideal": "roofline_s",
    "eff": "efficiency",
    "efficiency": "efficiency",
    "n": "occurrences",
    "flops": "flops",
    "bytes": "hbm_bytes",
    "wait": "exposed_wait_s",
    "exposed": "exposed_s",
    "op": "label",
    "name": "label",
    "bound": "bound_by",
    "category": "category",
    "source": "source",
    "program": "program",
}
_SORTABLE = {
    item.name: item.type
    for item in dataclasses.fields(OpEntry)
    if item.type
    in ("str", "int", "float", "str | None", "int | None", "float | None", "float | int")
}


@dataclass(frozen=True, slots=True)
class OpFilter:
    key: str | None  # None: bare text, matched in the name and the source
    value: str

    def __str__(self) -> str:
        return self.value if self.key is None else f"{self.key}={self.value}"

    def matches(self, op: OpEntry) -> bool:
        wanted = self.value.casefold()
        if self.key is None:
            return any(wanted in (text or "").casefold() for text in (op.label, op.source))
        if self.key == "flag":
            return any(flag.casefold() == wanted for flag in op.flags)
        if self.key == "program":
            program = (op.program or op.module or "").casefold()
            return wanted in (program, base_name(program))
        return str(getattr(op, _FIELD_FILTERS[self.key]) or "").casefold() == wanted


@dataclass(frozen=True, slots=True)
class OpOrder:
    field: str  # the OpEntry field
    column: str  # as the user named it
    descending: bool

    def __str__(self) -> str:
        return f"{self.column}, {'largest' if self.descending else 'smallest'} first"


def parse_filter(text: str) -> OpFilter:
    """``KEY=VALUE`` or bare text; ``ConfigError`` for an unknown key or an empty value."""
    key, equals, value = text.partition("=")
    if not equals:
        if not text.strip():
            raise ConfigError("--filter: empty; give KEY=VALUE or text to find in op names")
        return OpFilter(None, text.strip())
    key = key.strip().lower()
    if key not in FILTER_KEYS:
        raise ConfigError(
            f"--filter {text}: unknown key {key!r} (one of {', '.join(FILTER_KEYS)}, "
            "or bare text to find in op names and sources)"
        )
    if not value.strip():
        raise ConfigError(f"--filter {text}: no value after '='")
    return OpFilter(key, value.strip())


def parse_order(text: str) -> OpOrder:
    """``COLUMN`` or ``COLUMN:asc|desc``; ``ConfigError`` for a column the ops do not have."""
    column, colon, direction = text.partition(":")
    column = column.strip()
    field = SORT_ALIASES.get(column.lower(), column)
    if field not in _SORTABLE:
        names = ", ".join(sorted(SORT_ALIASES))
        raise ConfigError(
            f"--sort {text}: no such column (one of {names}, or a field of the JSON ops)"
        )
    if colon and direction.strip().lower() not in ("asc", "desc"):
        raise ConfigError(f"--sort {text}: the direction is asc or desc")
    numeric = "str" not in _SORTABLE[field]
    descending = direction.strip().lower() == "desc" if colon else numeric
    return OpOrder(field, column, descending)


def select_ops(
    ops: Sequence[OpEntry], filters: Sequence[OpFilter], order: OpOrder | None
) -> list[OpEntry]:
    """The ops every filter keeps, in ``order`` (stable: ties keep the report's order, by
    total time); ops without a value for the sort go last."""
    kept = [op for op in ops if all(f.matches(op) for f in filters)]
    if order is None:
        return kept
    present = [op for op in kept if getattr(op, order.field) is not None]
    missing = [op for op in kept if getattr(op, order.field) is None]
    present.sort(key=lambda op: _sort_value(getattr(op, order.field)), reverse=order.descending)
    return present + missing


def _sort_value(value: str | float) -> str | float:
    return value.casefold() if isinstance(value, str) else value


def selected(report: Report, filters: Sequence[OpFilter], order: OpOrder | None) -> Report:
    """A copy of ``report`` that lists only the selected ops, in order (the summary, the
    findings and everything else as they are)."""
    if not filters and order is None:
        return report
    return dataclasses.replace(report, ops=select_ops(report.ops, filters, order))


def heading(shown: int, listed: int, total: int, filters: Sequence[OpFilter], order: object) -> str:
    """The op table's title: ``Top 5 of 12 ops where category=matmul (of 251), by eff,
    smallest first``."""
    where = f" where {' and '.join(map(str, filters))} (of {total})" if filters else ""
    by = str(order) if order is not None else "total time"
    return f"Top {shown} of {listed} ops{where}, by {by}"
