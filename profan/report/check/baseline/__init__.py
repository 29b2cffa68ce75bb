"""Baselines that survive machines: what a program did, kept per device kind and chip.

A baseline file (JSON) holds one entry per machine (``"CPU/cpu"``, ``"TPU/v5e"``, ``"GPU/H100"``),
so one file serves a CPU CI runner and a TPU runner. An entry keeps

* the deterministic quantities, which compare exactly: per op (matched by the report's stable
  key) its executions per step, FLOPs, HBM and interconnect bytes per execution and, for
  collectives, kind, group size, groups and bytes; per step the totals of those; the device
  count and the mesh; per program the peak, argument, output and temporary bytes per device from
  XLA's buffer assignment (the report's memory section);
* the step times (count, min, median, max), which compare with a tolerance taken from the noise
  the steps showed: ``max(time_tolerance_min, time_noise_factor x (median - min) / min)`` over
  the baseline's steps and the new ones. Times gate only where they mean something: by default
  on TPUs and GPUs, not on CPUs (``time_gate = "auto"``), so a CPU runner gates on structure and
  an accelerator runner on time too.

Entries are built from ``Report.to_dict()`` (the JSON report of SCHEMA.md), not from the
report's internals. A report is compared with its machine's entry by
``profan.report.check.regressions`` (``against_file``), the engine that compares a profile with
a JSON report baseline too; a row about one op carries the op's source line (GitHub annotations
land there).
"""

from profan.report.check.baseline.entry import (
    FORMAT,
    FORMAT_VERSION,
    UPDATE_HINT,
    Entry,
    MemoryFacts,
    OpFacts,
    entry_from_report,
    is_baseline_file,
    machine_key,
    read_baselines,
    write_baseline,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "UPDATE_HINT",
    "Entry",
    "MemoryFacts",
    "OpFacts",
    "entry_from_report",
    "is_baseline_file",
    "machine_key",
    "read_baselines",
    "write_baseline",
]
