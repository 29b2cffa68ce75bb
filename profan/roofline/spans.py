"""Async transfers over their start-to-done spans.

The ``-done`` of an async pair measures only the wait for a transfer that ran alongside other
ops (``exposed_wait_s``).  Where the trace records the transfer's span from start to done
(``Profile.async_ops``; on TPU the "Async XLA Ops" line, which may cover only some devices), the
pair is scored over its spans: ``efficiency = roofline per execution x async_span_n /
async_span_s``.  Without spans a done's efficiency is undefined (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from profan.hlo.model import Instruction
from profan.trace.profile import row_groups
from profan.units import seconds

if TYPE_CHECKING:
    from profan.roofline.ops import OpRecord  # (ops reads the spans: no import back at run time)
    from profan.trace.profile import Profile


@dataclass(slots=True)
class AsyncSpans:
    """Start-to-done spans of one async op from the trace's async line."""

    total_s: float  # summed over the recorded executions
    executions: int
    devices: tuple[int, ...]  # the devices the async line covers for this op


def key_column(values: pd.Series) -> pd.Series:
    """Module keys as strings ('' for ops whose module is unknown), for joins."""
    return values.astype(object).where(values.notna(), "").astype(str)


def device_keys(ops: pd.DataFrame) -> pd.Series:
    """Which device each op ran on, unique across hosts: a categorical ``host/device``."""
    columns = [c for c in ("host", "device") if c in ops]
    if not len(ops) or not columns:
        return pd.Series(pd.Categorical(["0"] * len(ops)), index=ops.index)
    codes, first_rows = row_groups(ops, columns)
    firsts = ops[columns].iloc[first_rows]
    labels = ["/".join(str(v) for v in row) for row in firsts.itertuples(index=False)]
    return pd.Series(pd.Categorical.from_codes(codes, labels), index=ops.index)


def async_spans(profile: Profile) -> dict[tuple[str, str], AsyncSpans]:
    """(module key, op name) -> the op's async spans, from ``profile.async_ops``."""
    spans = profile.async_ops
    if spans is None or spans.empty:
        return {}
    frame = spans.assign(_key=key_column(spans["module_key"]))
    if "device" not in frame:
        frame = frame.assign(device=0)
    found: dict[tuple[str, str], AsyncSpans] = {}
    for (key, op_name), group in frame.groupby(["_key", "op_name"], sort=False):
        durations = pd.to_numeric(group["duration_s"], errors="coerce").dropna()
        devices = tuple(sorted(int(d) for d in group["device"].dropna().unique()))
        found[(str(key), str(op_name))] = AsyncSpans(
            float(durations.sum()), len(durations), devices
        )
    return found


def async_efficiency(
    per_execution_s: float, spans: AsyncSpans | None
) -> tuple[float | None, float | None, int | None, str]:
    """Efficiency of an async done over its spans: (efficiency, span total, n, derivation),
    ``None`` where undefined (no spans; an efficiency, where the spans or the ideal are 0 s)."""
    if spans is None or spans.executions == 0:
        return (
            None,
            None,
            None,
            (
                "async done: no start-to-done span in the trace, measured time is only the exposed "
                "wait, so efficiency is undefined"
            ),
        )
    devices = ",".join(str(d) for d in spans.devices) or "?"
    note = (
        f"async done: efficiency = ideal {seconds(per_execution_s)} x {spans.executions} spans "
        f"/ span total {seconds(spans.total_s)} (async line, device(s) {devices}); "
        "measured = exposed wait"
    )
    if spans.total_s <= 0 or per_execution_s <= 0:
        return None, spans.total_s, spans.executions, note
    return per_execution_s * spans.executions / spans.total_s, spans.total_s, spans.executions, note


def spans_of_done(
    spans_by_op: dict[tuple[str, str], AsyncSpans],
    module_key: str,
    op_name: str,
    instruction: Instruction | None,
) -> AsyncSpans | None:
    """A done's spans: under its own name (as TPU's async line names them), else under the name
    of the ``-start`` it waits on (its first operand)."""
    found = spans_by_op.get((module_key, op_name))
    if found is None and instruction is not None and instruction.operands:
        found = spans_by_op.get((module_key, instruction.operands[0].name))
    return found


def span_rows(profile: Profile, ops: Sequence[OpRecord]) -> np.ndarray:
    """For each row of ``profile.async_ops`` (one transfer's start-to-done span), the position
    in ``ops`` of the ``-done`` it belongs to (``-1`` where none): a span named after the
    done, else after the ``-start`` a done waits on, as ``spans_of_done`` finds them."""
    spans = profile.async_ops
    if spans is None or not len(spans):
        return np.zeros(0, dtype=np.int64)
    dones = [
        (row, op.module_key or "", op.name) for row, op in enumerate(ops) if op.async_role == "done"
    ]
    row_of: dict[tuple[str, str], int] = {}
    for row, key, name in dones:  # a done's own name first, as spans_of_done looks it up
        row_of.setdefault((key, name), row)
    for row, key, name in dones:
        instruction = profile.instruction(key, name) if key else None
        if instruction is not None and instruction.operands:
            row_of.setdefault((key, instruction.operands[0].name), row)
    found = [
        row_of.get((key, str(name)), -1)
        for key, name in zip(key_column(spans["module_key"]), spans["op_name"], strict=True)
    ]
    return np.asarray(found, dtype=np.int64)


def event_rows(profile: Profile, ops: Sequence[OpRecord]) -> np.ndarray:
    """For each row of ``profile.ops`` (an op execution), the position of its op's record in
    ``ops`` (``-1`` where it has none): one join shared by steps, checks and the timeline."""
    row_of: dict[tuple[str, str], int] = {}
    for row, op in enumerate(ops):
        row_of.setdefault((op.module_key or "", op.name), row)
    # Per op of the events (``Profile.op_groups``: its groups tell modules apart too, each
    # within one (module key, op name)), not per event; a name as ``ops.op_records`` keeps it.
    group_of, first_rows = profile.op_groups()
    firsts = profile.ops.iloc[first_rows]
    found = [
        row_of.get((key, str(name)), -1)
        for key, name in zip(
            key_column(firsts["module_key"]), firsts["op_name"].to_numpy(dtype=object), strict=True
        )
    ]
    per_execution: np.ndarray = np.asarray(found, dtype=np.int64)[group_of]
    return per_execution
