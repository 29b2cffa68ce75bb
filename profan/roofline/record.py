"""``OpRecord``: what scoring says of one op of a profile, typed as the figures are.

One record per (module, op), aggregated over the op's executions: figures are totals over them
(``occurrences``) unless a name says otherwise.  A figure the op lacks is ``None`` (an op without
an instruction has no opcode, a synchronous op no async span), never a NaN; counts are ints.
``profan.roofline.ops`` builds the records, ``profan.roofline.checks`` adds ``note`` and
``faster_executions``.  The report's ``OpEntry`` takes every field of the same name as it is
(``profan.report.analysis.build``; the few whose JSON form differs are set there), so a new
per-op figure is a field here, where ``ops`` computes it, and the same field in ``OpEntry`` if
the report should carry it.
"""

from __future__ import annotations

from dataclasses import dataclass

from profan.roofline.facts import CollectiveFacts


@dataclass(frozen=True, slots=True)
class OpRecord:
    """One op of a profile against the roofline, over all its executions."""

    module: str  # the module's name as the trace names it
    name: str  # the HLO instruction's name (the trace's op name)
    opcode: str | None  # None where the op has no instruction
    category: str  # profan.attribute's category ("other" without an instruction)
    occurrences: int  # executions, all devices
    measured_s: float  # their measured time (an async done's: only its exposed wait)
    flops: float | None  # None: unknown
    hbm_bytes: float  # what the roofline charges to HBM
    ici_bytes: float  # interconnect bytes (an async collective's on its done)
    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    t_host_s: float
    t_transcendental_s: float
    roofline_s: float  # the ideal time: the largest term
    bound_by: str  # profan.roofline.terms.BOUNDS, "none", "async-start" or "unknown"
    # roofline over measured time (an async done's: over its start-to-done spans); None where
    # either is zero or a done has no span
    efficiency: float | None
    source: str | None  # file:line (the trace's, else the HLO metadata's)
    cost_source: str  # "profan", "trace" (a figure came from the trace) or "none" (no HLO)
    flops_source: str  # profan.cost.kernels.SOURCES
    bytes_source: str
    peak: str | None  # the FLOP/s peak of the compute term: bf16, tf32, bf16/6, …
    trace_flops: float | None  # the profiler's own figures, where the trace has them
    trace_bytes: float | None
    dtype: str | None  # element type of the math
    async_role: str | None  # "start" | "done" for async pairs
    link: str  # the link an async transfer occupies: its bound, with a host copy's direction
    module_key: str | None  # key into Profile.modules; None where the module's HLO is missing
    # async dones: the start-to-done spans of the trace's async line (their total, and count)
    # and the measured wait; None for other ops, and for a done without spans
    async_span_s: float | None
    async_span_n: int | None
    exposed_wait_s: float | None
    scope: str | None  # named scope (op path without its primitive)
    op_path: str | None  # metadata op_name
    position: int | None  # index in program order (profan.roofline.facts)
    shape: str | None  # result shape without layouts
    collective: CollectiveFacts | None
    derivation: str  # how the figures were derived, "; "-joined
    bytes_by_space: dict[str, float]  # bytes per memory space: ``hbm`` first
    # executions measured faster than the roofline, and why (profan.roofline.checks)
    faster_executions: int
    note: str | None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step against the roofline, on its busiest device (``profan.roofline.steps`` says
    how each figure is measured).  The fields' order is the report's (JSON ``steps``)."""

    step: int
    measured_s: float  # the step's ops' span, never less than its window
    ideal_s: float
    efficiency: float | None  # ideal over measured (None: a step of 0 s)
    mfu: float | None
    model_flops: float  # over all the step's devices
    # the share of the step's op time whose op each bound (profan.roofline.terms.BOUNDS) bounds
    share_compute: float
    share_hbm: float
    share_ici: float
    share_host: float
    share_transcendental: float
    share_unknown: float
    # per device: the measured time split by the bound of the ops running, and idle
    time_compute_s: float
    time_hbm_s: float
    time_ici_s: float
    time_host_s: float
    time_transcendental_s: float
    time_unknown_s: float
    idle_s: float
    window_s: float  # the trace's step window
    devices: int  # that ran ops in the step
    note: str | None
