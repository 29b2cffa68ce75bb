"""``Profile``: what one profiling run recorded, as tidy tables joined to the HLO that ran."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from profan.hlo.model import Instruction, Module

# Columns of ``Profile.ops``: one row per op execution on a device.
OP_COLUMNS: tuple[str, ...] = (
    "host",  # host name the xplane came from
    "device",  # device ordinal (int)
    "device_kind",  # "TPU" | "GPU" | "CPU"
    "module",  # HLO module name as the trace names it
    "module_key",  # key into Profile.modules (None when the module's HLO is missing)
    "program_id",  # XLA program id (int) or <NA>
    "op_name",  # HLO instruction name (the trace's hlo_op)
    "step",  # step number (int) or <NA>
    "start_s",  # start, seconds since the earliest event of the profile
    "duration_s",  # measured duration, seconds (kernels of one op on GPU are summed)
    "trace_flops",  # the trace's own per-op FLOPs (TPU), else NaN
    "trace_bytes_accessed",  # the trace's own per-op bytes (TPU), else NaN
    "trace_model_flops",  # the trace's model FLOPs (TPU), else NaN
    "source",  # the trace's source stat, where present
    "matched",  # bool: joined to an Instruction
)


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

    @property
    def unmatched_count(self) -> int:
        return sum(item.count for item in self.unmatched)

    def instruction(self, module_key: str, op_name: str) -> Instruction | None:
        """The HLO instruction an op event was joined to (searching every computation)."""
        module = self.modules.get(module_key)
        if module is None:
            return None
        for computation in module.computations:
            found = computation.get(op_name)
            if found is not None:
                return found
        return None
