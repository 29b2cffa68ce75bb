"""The kernels each GPU op ran: one row per (device, module, program, op, kernel name, launch
details), with how many ran and their summed time, as the trace recorded them.

An op execution keeps only its kernel count (``Profile.ops.kernel_count``); the names, counts
and times live here, summed per device, so what is kept grows with the distinct kernels of a
run, not with its executions.  The reader (``profan.trace.gpu``) sums the kernels it turns into
executions; ``load`` adds those run inside command buffers once they are attributed
(``profan.trace.command_buffers``), then joins every row to its module (``kernel_frame``).
``details`` is the trace's ``kernel_details`` stat as it is (NVIDIA: ``regs:168
static_shared:0 dynamic_shared:213188 grid:2,66,1 block:384,1,1 occ_pct:18.75``; ROCm: ``
grid:8,32,1 block:256,1,1 private_mem:0 group_mem:12800 occ_pct:0``), None where absent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from profan.trace.planes import NA_INT, PROGRAM_NA, Coded, HostTrace, joined

# The columns a reader sends per device (``HostTrace.kernels``: parts of each).
KERNEL_PARTS = (
    "device",
    "module",
    "program_id",
    "op_name",
    "kernel",
    "details",
    "count",
    "duration_ps",
)
# ``Profile.kernels``' columns and their dtypes.
KERNEL_DTYPES: dict[str, str] = {
    "host": "category",
    "device": "Int64",
    "module": "category",  # as Profile.ops names it (filled from the program id where absent)
    "module_key": "category",  # key into Profile.modules (<NA>: no HLO for the module)
    "program_id": "UInt64",  # XLA program id (<NA>: none recorded)
    "op_name": "category",  # the op the kernels ran for (hlo_op, or its attributed instruction)
    "kernel": "category",  # the kernel's name (the event's name)
    "details": "category",  # the kernel_details stat as recorded (<NA>: none)
    "count": "int64",  # kernels of this name and details the op ran on the device
    "time_s": "float64",  # their summed durations, seconds
}
# Mixed-radix group numbers stay below this; beyond, the running numbers are renumbered.
_RADIX_LIMIT = 1 << 62


def _group_codes(values: Any) -> tuple[np.ndarray, int]:
    """Each row's value as a small number (missing: a value of its own) and how many there are."""
    if isinstance(values, Coded):
        return values.codes.astype(np.int64) + 1, len(values.values) + 1
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), max(len(uniques), 1)


def _strings(values: Any, rows: np.ndarray) -> np.ndarray:
    """Rows of a string column (``Coded`` or object array) as an object array."""
    return values.take(rows).objects() if isinstance(values, Coded) else values[rows]


def kernel_totals(columns: dict[str, Any], ordinal: int) -> dict[str, np.ndarray]:
    """The kernels of one device (columns ``module``, ``program``, ``name``: the op,
    ``kernel``, ``details``, ``duration``; strings ``Coded`` or object arrays) summed per
    (module, program, op, kernel, details), in ``KERNEL_PARTS`` layout."""
    count = len(columns["duration"])
    combined = np.zeros(count, dtype=np.int64)
    size = 1
    for name in ("module", "program", "name", "kernel", "details"):
        codes, values = _group_codes(columns[name])
        if size * values >= _RADIX_LIMIT:
            _, inverse = np.unique(combined, return_inverse=True)
            combined, size = inverse.astype(np.int64), int(inverse.max()) + 1
        combined = combined * values + codes
        size *= values
    _, first, group = np.unique(combined, return_index=True, return_inverse=True)
    order = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.diff(group[order], prepend=-1))
    return {
        "device": np.full(len(first), ordinal, dtype=np.int64),
        "module": _strings(columns["module"], first),
        "program_id": np.asarray(columns["program"])[first].astype(np.uint64),
        "op_name": _strings(columns["name"], first),
        "kernel": _strings(columns["kernel"], first),
        "details": _strings(columns["details"], first),
        "count": np.diff(np.append(starts, count)).astype(np.int64),
        "duration_ps": np.add.reduceat(columns["duration"][order].astype(np.int64), starts)
        if count
        else np.zeros(0, dtype=np.int64),
    }


def add_parts(kernels: dict[str, list[np.ndarray]], totals: dict[str, np.ndarray]) -> None:
    """Append one device's ``kernel_totals`` to a host's ``kernels`` parts."""
    for name in KERNEL_PARTS:
        kernels[name].append(totals[name])


ModuleKey = Callable[[int, str | None], str | None]


def kernel_frame(
    hosts: list[HostTrace], module_names: dict[int, str], module_key: ModuleKey
) -> pd.DataFrame | None:
    """``Profile.kernels``: every host's kernel totals, each row joined to its module as the
    op executions are (``module_key(program id, module name)``), in ``KERNEL_DTYPES``
    layout; None when no host ran kernels (not a GPU trace)."""
    frames = []
    for host in hosts:
        if not host.kernels or not host.kernels.get("count"):
            continue
        columns = {name: joined(list(host.kernels[name])) for name in KERNEL_PARTS}
        host.kernels = {}
        module = np.asarray(_objects(columns["module"]), dtype=object)
        program = columns["program_id"].astype(np.uint64)
        missing = np.array([m is None for m in module], dtype=bool)
        module[missing] = [
            module_names.get(int(p)) if p != PROGRAM_NA else None for p in program[missing]
        ]
        pairs = pd.DataFrame({"program": program, "module": module})
        codes, uniques = pd.factorize(pd.MultiIndex.from_frame(pairs))
        keys = np.array(
            [module_key(int(p), m if isinstance(m, str) else None) for p, m in uniques],
            dtype=object,
        )
        device = columns["device"].astype(np.int64)
        frames.append(
            pd.DataFrame(
                {
                    "host": host.host,
                    "device": pd.arrays.IntegerArray(device, device == NA_INT),
                    "module": module,
                    "module_key": keys[codes],
                    "program_id": pd.arrays.IntegerArray(program, program == PROGRAM_NA),
                    "op_name": _objects(columns["op_name"]),
                    "kernel": _objects(columns["kernel"]),
                    "details": _objects(columns["details"]),
                    "count": columns["count"].astype(np.int64),
                    "time_s": columns["duration_ps"].astype(np.float64) / 1e12,
                }
            )
        )
    if not frames:
        return None
    frame = pd.concat(frames, ignore_index=True)
    return frame.astype(KERNEL_DTYPES)


def _objects(values: Any) -> np.ndarray:
    return values.objects() if isinstance(values, Coded) else np.asarray(values, dtype=object)
