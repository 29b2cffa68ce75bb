"""One op of a report (JSON ``ops[]``) and one finding of the rules (JSON ``findings[]``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from profan.report.model.codec import OMIT_NONE


@dataclass(slots=True)
class OpEntry:
    """One HLO op of one module, aggregated over its executions: its ``roofline.OpRecord``'s
    figures (a field of the same name is the record's, as it is:
    ``profan.report.analysis.build``) and what the report adds."""

    key: str  # stable identity across recompiles (see profan.report.keys)
    module: str
    name: str
    opcode: str
    category: str
    occurrences: int
    measured_s: float
    flops: float
    hbm_bytes: float
    ici_bytes: float
    t_compute_s: float
    t_hbm_s: float
    t_ici_s: float
    roofline_s: float
    bound_by: str
    efficiency: float | None
    scope: str | None = None
    collective: dict[str, Any] | None = None
    global_shapes: list[str] = field(default_factory=list)
    # matmuls: global dims of lhs/rhs/out and the mesh axes splitting each (report.splits)
    splits: dict[str, Any] | None = None
    shape: str | None = None
    source: str | None = None
    exposed_s: float | None = None  # time not overlapped with compute (collectives, host ops)
    # async dones (measured_s is then the exposed wait): the transfer's start-to-done spans as
    # the trace's async line records them (total over async_span_n executions), and the ideal
    # of those same transfers; efficiency is then async_span_ideal_s / async_span_s, the
    # transfer's verdict (the wait is only its exposed part, a figure of its own)
    async_span_s: float | None = None
    async_span_n: int | None = None
    exposed_wait_s: float | None = None
    async_span_ideal_s: float | None = None
    flags: list[str] = field(default_factory=list)
    # where flops and hbm_bytes/ici_bytes come from (profan.cost.kernels.SOURCES: hlo,
    # backend-config, cost-estimate, trace, shape-signature, lower-bound, unknown)
    flops_source: str | None = None
    bytes_source: str | None = None
    peak: str | None = None  # the FLOP/s peak the compute term used: bf16, tf32, bf16/6, …
    # the transcendentals (exp, log, tanh, …) at the chip's transcendental rate; 0 without any,
    # or when the chip has no rate (then chip.figure_sources says "unknown")
    t_transcendental_s: float = 0.0
    # the profiler's own figures (totals like flops/hbm_bytes) where the trace has them; a TPU
    # trace's bytes count every memory space (compare with ``all_space_bytes``)
    trace_flops: float | None = None
    trace_bytes: float | None = None
    # bytes moved in each memory space the op touches, over its executions: ``hbm`` (=
    # ``hbm_bytes``) and, where it touches them, ``vmem``, ``host``, ``S(n)``; None in reports
    # written before it existed
    bytes_by_space: dict[str, float] | None = None
    # executions that ran faster than the roofline allows (zero-length events, on-chip caches,
    # split events), and the scorer's words on why
    faster_executions: int | None = None
    note: str | None = None
    # the program: the key of its module in the profile (``jit_matmul(19)``), None without HLO
    program: str | None = None
    # the name as shown: ``name``, or ``program/name`` where several programs have an op of
    # that name (profan.report.analysis.build); reports written before it existed read back
    # with name
    label: str = ""
    # GPU: the kernels the op ran, heaviest first, over its executions on every device
    # (profan.report.analysis.kernels: name, count, time_s, launch, launch_configs, tile);
    # None where the trace has no kernels (TPU, CPU) or the report predates the field
    kernels: list[dict[str, Any]] | None = None
    # The HTML page's detail pane (profan.report.page; null unless the report was built for
    # the page): the instruction as profan prints it, a fusion's fused computation, and the
    # source stack innermost first (``file:line in function``)
    hlo: str | None = None
    fused_body: str | None = None
    stack: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.label:
            self.label = self.name
        if self.async_span_ideal_s is None and self.async_span_n and self.occurrences > 0:
            # reports written before the field: the same figure from the ones they carry
            self.async_span_ideal_s = self.roofline_s / self.occurrences * self.async_span_n

    @property
    def cost_known(self) -> bool:
        """Whether the FLOPs and bytes are known (not unknown, not only a lower bound): only
        then is the ideal time an ideal, and the efficiency more than a lower bound."""
        uncertain = {"unknown", "lower-bound"}
        return self.flops_source not in uncertain and self.bytes_source not in uncertain

    @property
    def all_space_bytes(self) -> float:
        """Bytes moved in every memory space (HBM alone for reports that predate the split)."""
        return sum(self.bytes_by_space.values()) if self.bytes_by_space else self.hbm_bytes

    @property
    def intensity(self) -> float:
        return self.flops / self.hbm_bytes if self.hbm_bytes > 0 else math.inf


@dataclass(slots=True)
class Finding:
    """One suspicious op (or whole-profile observation) found by a rule."""

    rule: str
    message: str
    look_at: str
    op: str | None = None  # OpEntry.key
    module: str | None = None
    name: str | None = None
    source: str | None = None
    time_s: float = 0.0  # time at stake (the op's or ops' measured time, all devices)
    host: str | None = field(default=None, metadata=OMIT_NONE)  # JSON: only when set
    # What fixing it would save (profan.report.rules.savings): time, all devices over the captured
    # steps, and that as a share of the devices' time; or bytes per device, and that as a share
    # of the chip's memory per device.  None where the rule cannot say; ``saving_from`` says how
    # the figure was estimated.
    saving_s: float | None = None
    saving_share: float | None = None
    saving_bytes: float | None = None
    saving_memory_share: float | None = None
    saving_from: str | None = None
