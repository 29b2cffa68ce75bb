"""``Profile``: what one profiling run recorded, as tidy tables joined to the HLO that ran."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from profan.arrays import TABLE_LIMIT, distinct
from profan.hlo.model import Instruction, Module
from profan.trace.hosts import HostsAnalysis

# Columns of ``Profile.ops`` (one row per op execution on a device) and their pandas dtypes.
# Strings that repeat across rows are ``category``; integers that may be missing are nullable.
OP_DTYPES: dict[str, str] = {
    "host": "category",  # host name the xplane came from
    "device": "Int64",  # device ordinal
    "device_kind": "category",  # "TPU" | "GPU" | "CPU"
    "module": "category",  # HLO module name as the trace names it
    "module_key": "category",  # key into Profile.modules (<NA> when the module's HLO is missing)
    "program_id": "UInt64",  # XLA program id (TPU ids use all 64 bits)
    "op_name": "category",  # HLO instruction name (the trace's hlo_op)
    "step": "Int64",  # step number
    "start_s": "float64",  # start, seconds since the earliest op event of the profile
    "duration_s": "float64",  # measured duration, seconds (kernels of one op on GPU are summed)
    "trace_flops": "float64",  # the trace's own per-op FLOPs (TPU), else NaN
    "trace_bytes_accessed": "float64",  # the trace's own per-op bytes (TPU), else NaN
    "trace_model_flops": "float64",  # the trace's model FLOPs (TPU), else NaN
    "source": "category",  # the trace's source stat (file:line), where present
    "matched": "bool",  # joined to an Instruction
    # Beyond the contract's columns:
    "run_id": "Int64",  # the execution's run id (CPU and GPU traces)
    "kernel_count": "int64",  # kernels the op launched (GPU), else 1
}
OP_COLUMNS: tuple[str, ...] = tuple(OP_DTYPES)[: list(OP_DTYPES).index("matched") + 1]
# What tells one HLO op from another in ``Profile.ops`` (also when programs share a module name).
OP_IDENTITY = ("module", "module_key", "op_name")


def row_groups(frame: pd.DataFrame, columns: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The group of each row of ``frame`` (rows alike in ``columns``, a missing value being a
    value of its own), numbered in order of first appearance as ``groupby(columns, sort=False,
    dropna=False).ngroup()`` numbers them, and each group's first row.  Categorical columns
    are grouped by their codes: no value is hashed per row."""
    combined = np.zeros(len(frame), dtype=np.int64)
    for column in columns:
        values = frame[column].array
        if isinstance(values, pd.Categorical):
            codes, size = values.codes.astype(np.int64) + 1, len(values.categories) + 1
        elif values.dtype.kind in "iu" and len(values) and not values.isna().any():
            # integers without a gap (run ids, device numbers): counted, not hashed
            uniques, codes = distinct(values.to_numpy())
            size = len(uniques)
        else:
            codes, uniques = pd.factorize(values, use_na_sentinel=False)
            size = len(uniques)
        combined *= size
        combined += codes
    if not len(combined) or int(combined.max()) > TABLE_LIMIT:
        group_of = pd.factorize(combined)[0].astype(np.int64, copy=False)
        # Groups are numbered as they first appear: a row starts its group where the running
        # maximum of the numbers grows.
        running = np.maximum.accumulate(group_of)
        first = np.ones(len(group_of), dtype=bool)
        first[1:] = running[1:] > running[:-1]
        return group_of, np.flatnonzero(first)
    # Few possible groups (the usual case): counted into a table, then numbered by their
    # first rows.
    _, sorted_group = distinct(combined)
    first_row = np.full(int(sorted_group.max()) + 1, len(combined), dtype=np.int64)
    np.minimum.at(first_row, sorted_group, np.arange(len(combined)))
    by_appearance = np.argsort(first_row, kind="stable")
    number = np.empty(len(first_row), dtype=np.int64)
    number[by_appearance] = np.arange(len(first_row))
    return number[sorted_group], first_row[by_appearance]


@dataclass(slots=True)
class DeviceInfo:
    """The accelerator as the trace describes it."""

    kind: str  # "TPU" | "GPU" | "CPU"
    type_string: str | None  # e.g. "TPU v6 Lite", "AMD Instinct MI300X"
    count: int  # devices seen across all hosts
    hosts: list[str] = field(default_factory=list)
    peak_flops_per_s: float | None = None  # from plane stats, when the trace has them
    peak_hbm_bytes_per_s: float | None = None
    stats: dict[str, object] = field(default_factory=dict)  # other plane stats, raw

    @classmethod
    def from_stats(
        cls, kind: str, stats: Mapping[str, Any], count: int, hosts: list[str] | None = None
    ) -> DeviceInfo:
        """The device as a device plane's stats describe it (``stats``: the first device's),
        with ``count`` devices on ``hosts``: its type, its peak FLOP/s and HBM bandwidth where
        the trace records them (ROCm's ``memory_bandwidth`` for the latter), the other stats
        as they are (bytes left out)."""
        type_string = stats.get("device_type_string")
        peak_flops = stats.get("peak_teraflops_per_second")
        peak_hbm = stats.get("peak_hbm_bw_gigabytes_per_second")
        hbm_bytes_per_s = stats.get("memory_bandwidth")  # ROCm's, in bytes/s
        return cls(
            kind=kind,
            type_string=type_string if isinstance(type_string, str) else None,
            count=count,
            hosts=list(hosts or []),
            peak_flops_per_s=float(peak_flops) * 1e12 if peak_flops else None,
            peak_hbm_bytes_per_s=(
                float(peak_hbm) * 1e9
                if peak_hbm
                else float(hbm_bytes_per_s)
                if hbm_bytes_per_s
                else None
            ),
            stats={k: v for k, v in stats.items() if not isinstance(v, bytes)},
        )


@dataclass(slots=True)
class Unmatched:
    """Op events that could not be joined to an HLO instruction, for one reason."""

    reason: str
    count: int
    examples: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Profile:
    """One profiling run: op executions (``ops``), steps, device, and the modules that ran."""

    path: str
    run: str | None
    ops: pd.DataFrame
    steps: pd.DataFrame  # columns: step, start_s, end_s, duration_s (per the slowest device)
    device: DeviceInfo
    modules: dict[str, Module] = field(default_factory=dict)
    unmatched: list[Unmatched] = field(default_factory=list)
    # Spans of async ops (TPU "Async XLA Ops": start to done), same columns as ``ops``; kept
    # apart so per-op time is not counted twice.  None when the trace has none.
    async_ops: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)  # how steps were found, files skipped, …
    # Wall-clock time of ``start_s == 0`` (ns since the epoch, on the first host's clock).
    origin_ns: int = 0
    # The cross-host view (``profan.trace.hosts``) when two or more hosts were read.
    hosts: HostsAnalysis | None = None
    # The serialized HloProto (module and buffer assignment) of every program that ran, by
    # ``name(program_id)``: what the memory analysis reads, so it never reads the trace again.
    hlo_protos: dict[str, bytes] = field(default_factory=dict, repr=False)
    # GPU: the kernels each op ran, per device (``profan.trace.kernels.KERNEL_DTYPES``): one
    # row per (host, device, op, kernel name, launch details), counted and timed; None
    # elsewhere, and for a pod read host by host (``profan.trace.pod``'s reduced form)
    kernels: pd.DataFrame | None = None
    # instruction() lookups: module key -> instruction name -> instruction (built on first use)
    _instructions: dict[str, dict[str, Instruction]] = field(
        default_factory=dict, compare=False, repr=False
    )
    # op_groups() of the ``ops`` frame it was made from (scoring, steps and the report's
    # timelines each group the executions by op)
    _op_groups: tuple[pd.DataFrame, np.ndarray, np.ndarray] | None = field(
        default=None, compare=False, repr=False
    )

    def __repr__(self) -> str:
        # one line: the tables and modules run to megabytes (a notebook would print them all)
        device = self.device
        hosts = len(device.hosts)
        kind = device.type_string or device.kind
        run = f" (run {self.run})" if self.run else ""
        return (
            f"<profan.Profile {self.path}{run}: {device.count} × {kind} on {hosts} "
            f"host{'s' if hosts != 1 else ''}, {len(self.steps)} steps, {len(self.ops)} op "
            f"executions, {len(self.modules)} module{'s' if len(self.modules) != 1 else ''}>"
        )

    def op_groups(self) -> tuple[np.ndarray, np.ndarray]:
        """``row_groups(self.ops, OP_IDENTITY)``: each execution's op, numbered in order of
        first appearance, and each op's first row (made once per ``ops`` frame)."""
        made = self._op_groups
        if made is None or made[0] is not self.ops:
            made = self._op_groups = (self.ops, *row_groups(self.ops, OP_IDENTITY))
        return made[1], made[2]

    @property
    def unmatched_count(self) -> int:
        return sum(item.count for item in self.unmatched)

    def instruction(self, module_key: str, op_name: str) -> Instruction | None:
        """The HLO instruction an op event was joined to (the first computation, in module
        order, that has an instruction of that name)."""
        index = self._instructions.get(module_key)
        if index is None:
            module = self.modules.get(module_key)
            if module is None:
                return None
            index = {}
            for computation in module.computations:
                for candidate in computation.instructions:
                    index.setdefault(candidate.name, candidate)
            self._instructions[module_key] = index
        return index.get(op_name.lstrip("%"))
