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

    #: stable identity across recompiles: `module base name | JAX op path | op kind`, plus `#n`
    #: for the n-th op sharing it (program order). Numeric suffixes (`fusion.123`, `jit_f(456)`)
    #: are dropped. Baselines and diffs match ops by `key`
    key: str  # stable identity across recompiles (see profan.report.keys)
    #: the module's name, as in the trace / HLO
    module: str
    #: the op's name, as in the trace / HLO
    name: str
    #: the op's opcode, as in the HLO
    opcode: str
    #: `matmul`, `collective`, `elementwise`, `reduction`, `data-movement`, `host`, `control`,
    #: `custom`, `other`
    category: str
    #: executions (events) summed over devices
    occurrences: int
    #: total measured time, all occurrences, all devices
    measured_s: float
    #: FLOPs as the scorer (`profan.roofline.score`) gives them, over all occurrences
    flops: float
    #: HBM bytes as the scorer gives them, over all occurrences
    hbm_bytes: float
    #: interconnect bytes as the scorer gives them, over all occurrences
    ici_bytes: float
    #: roofline term (MODEL.md §1): the FLOPs at the peak of the op's dtype and precision
    t_compute_s: float
    #: roofline term: the HBM bytes at the chip's HBM bandwidth
    t_hbm_s: float
    #: roofline term: the interconnect bytes at the links' bandwidth
    t_ici_s: float
    #: `max(t_compute_s, t_hbm_s, t_ici_s, t_transcendental_s)`, and the PCIe time of host
    #: copies (the ideal time)
    roofline_s: float
    #: the largest roofline term: `compute`, `hbm`, `ici`, `host` (PCIe copies),
    #: `transcendental` (the chip's transcendental unit); `async-start` for the issuing half of
    #: an async pair (scored on its `-done`); `unknown` when the op could not be costed
    bound_by: str
    #: `roofline_s / measured_s` (1.0 = at the roofline), `null` when unknown; for an async
    #: `-done` with spans: `async_span_ideal_s / async_span_s` (the transfer against its ideal
    #: over its start-to-done span), `null` for an async `-done` without spans (its measured
    #: time is only the wait)
    efficiency: float | None
    #: the JAX named scope (`profan.attribute.scope_of`)
    scope: str | None = None
    #: for collectives (either half of an async pair): `kind` (opcode without
    #: `-start`/`-done`), `group_size` (devices in the first replica group; for
    #: `collective-permute` the number of source-target pairs), `groups` (number of replica
    #: groups; `null` for `collective-permute`), `bytes` (the op's own output, all tuple
    #: leaves), `axes` (mesh axis names the groups run over, `null` when no mesh axis fits);
    #: else `null`
    collective: dict[str, Any] | None = None
    #: global (unsharded) shapes: for a matmul `lhs`, `× rhs`, `-> out` (three strings);
    #: otherwise the output's, from its `sharding=`, when sharded
    global_shapes: list[str] = field(default_factory=list)
    #: matmuls only (else `null`): `{"dtype", "lhs", "rhs", "out", "partial_sum_axes"}`; each of
    #: `lhs`/`rhs`/`out` is `{"dims": [global sizes], "axes": [[mesh axes splitting that dim],
    #: …]}` (an empty list: not split); `partial_sum_axes`: mesh axes over which the output is a
    #: partial sum (a contracting dim is split) (`profan.report.analysis.splits`)
    splits: dict[str, Any] | None = None
    #: the op's (per-device) output shape
    shape: str | None = None
    #: `file:line` of the user code that made the op
    source: str | None = None
    #: collectives and host ops: time not overlapped with compute on the same device
    exposed_s: float | None = None  # time not overlapped with compute (collectives, host ops)
    #: async `-done` ops (their `measured_s` is then the exposed wait) whose start-to-done spans
    #: the trace records (TPU "Async XLA Ops" line, which may cover only some devices;
    #: `Profile.async_ops`): the spans' total, seconds, over `async_span_n` executions; else
    #: `null`
    async_span_s: float | None = None
    #: how many executions `async_span_s` sums (may be fewer than `occurrences` when the async
    #: line covers fewer devices); else `null`
    async_span_n: int | None = None
    #: async `-done` ops: the exposed wait (= `measured_s`, the part of the transfer not hidden
    #: behind other work); else `null`
    exposed_wait_s: float | None = None
    #: async `-done` ops with spans: the ideal of the `async_span_n` transfers the spans cover
    #: (`roofline_s / occurrences × async_span_n`), so that `efficiency = async_span_ideal_s /
    #: async_span_s` is the transfer's verdict (the wait is `exposed_wait_s`, a figure of its
    #: own); else `null`. Added within schema 3; read back from older reports as computed from
    #: those fields
    async_span_ideal_s: float | None = None
    #: names of the rules that fired on this op
    flags: list[str] = field(default_factory=list)
    #: where `flops` comes from (`profan.cost.kernels.SOURCES`): `hlo` (the op's shapes and
    #: attributes), `backend-config` (the call's backend config: dimension numbers, attention
    #: sizes), `cost-estimate` (the kernel author's cost estimate in the backend config), `trace`
    #: (the profiler's own per-op figure), `shape-signature` (read from the operand shapes: a
    #: matmul or attention by its shapes), `upper-bound` (at most this: a fusion seen without its
    #: body, an attention kernel's block mask counted full), `lower-bound` (at least this:
    #: operands plus results), `unknown` (no model: add one with `--kernels FILE`). The table
    #: marks them `(c)`, `(e)`, `(t)`, `(s)`, `≤`, `≥`, `?` (nothing for `hlo`). An op with
    #: either source `unknown` or `lower-bound` has an ideal time that is only a lower bound: no
    #: rule calls it far from its roofline and no efficiency budget judges it. Added in schema 2
    flops_source: str | None = None
    #: where `hbm_bytes`/`ici_bytes` come from, in the words of `flops_source`. Added in schema 2
    bytes_source: str | None = None
    #: the FLOP/s peak its compute term used: `bf16`, `tf32`, `f32`, `bf16/6` (f32 HIGHEST on
    #: TPU: six bf16 passes), …; `null` without FLOPs. Added in schema 2
    peak: str | None = None  # the FLOP/s peak the compute term used: bf16, tf32, bf16/6, …
    #: the op's transcendentals (exp, log, tanh, logistic, sqrt, … as XLA's cost analysis
    #: counts them, apart from its FLOPs) at the chip's transcendental rate (the TPU's EUP, a
    #: GPU's special function units; `profan chips` gives each rate's derivation); `0` without
    #: transcendentals or when the chip has no rate (then `chip.figure_sources` says `unknown`).
    #: Those units run beside the matrix and vector units, so this term is not added to
    #: `t_compute_s`: the ideal is the larger. Added in schema 2 (read back as `0` from older
    #: reports)
    t_transcendental_s: float = 0.0
    #: the profiler's own FLOPs (a total like `flops`) where the trace has them, else `null`;
    #: the table shows them beside profan's when they differ more than 2×. Added in schema 2
    trace_flops: float | None = None
    #: the profiler's own bytes where the trace has them, else `null`; a TPU trace's
    #: `bytes_accessed` counts every memory space, so `trace_bytes` compares with the sum of
    #: `bytes_by_space`. Added in schema 2
    trace_bytes: float | None = None
    #: bytes the op moves in each memory space it touches, over all occurrences (space →
    #: bytes): `hbm` (= `hbm_bytes`, the roofline's) always; `vmem` (TPU VMEM, `S(1)`: operands
    #: prefetched on chip, a `copy-done` into it), `host` (pinned host memory, `S(5)`: a host
    #: copy's host side), `S(n)` (other spaces; on TPU `S(2)` sync flags, `S(4)`/`S(6)` SMEM
    #: scalars) where it moves any. Each space is costed with the HBM bytes' rules applied to
    #: that space's arrays; their sum is the figure XProf's "Measured memory BW" counts (the
    #: compiler's `bytes_accessed`) where `hbm_bytes` is its "HBM BW"
    #: ([`docs/tpu_golden.md`](../../docs/tpu_golden.md)). Added in schema 3 (absent from older
    #: reports: read them as `{"hbm": hbm_bytes}`)
    bytes_by_space: dict[str, float] | None = None
    #: how many executions ran faster than the op's roofline allows (zero-length events, on-chip
    #: caches, split events, a link faster than the chip's figure), else `null`; for an async
    #: `-done` the executions counted are its start-to-done spans (of `async_span_n`) shorter
    #: than one transfer's ideal, never its waits (a done without spans counts none). Added in
    #: schema 2
    faster_executions: int | None = None
    #: why executions ran faster than the roofline, in words, else `null`; the table prints the
    #: note under the op. Added in schema 2
    note: str | None = None
    #: the key of the op's module in the profile: `name(program id)` as the trace names
    #: programs (`jit_matmul(19)`), or the dump's name with `--hlo`; `null` for events without
    #: HLO. Added in schema 2
    program: str | None = None
    #: the name as the report shows it: `name` where no other op of the report has that name;
    #: else `module/name` (`jit_dot/custom-call.1`); else, where several programs share the
    #: module name too, `program/name` with the program's key (`jit_matmul(19)/custom-call.1`).
    #: Unique within a report. Added in schema 2 (read back as `name` from schema 1)
    label: str = ""
    #: GPU reports: the kernels the op ran, heaviest first, one entry per kernel name: `name`
    #: (the trace's event name), `count` and `time_s` (summed over the op's executions on every
    #: device and host; they add up to the op's executions' kernels and to `measured_s`; kernels
    #: inside CUDA graphs as `profan.trace.command_buffers` attributes them), `launch` (the
    #: trace's `kernel_details` stat key by key as the trace names them, numbers and `x,y,z`
    #: lists parsed: NVIDIA `regs`, `static_shared`, `dynamic_shared`, `grid`, `block`,
    #: `occ_pct`; ROCm `grid`, `block`, `private_mem`, `group_mem`, `occ_pct`; `null` when the
    #: trace has none or several configurations), `launch_configs` (how many distinct
    #: `kernel_details` the kernel had), `tile` (the tile its name states: `{text, m, n, k}` for
    #: Tensile `MT256x224x64` and cuBLAS xmma `tilesize128x128x32`, `{text, m, n, k, stages}` for
    #: CUTLASS `..._gemm_64x64_16x4_...`; `{text, as_named: true}` for sizes the library does not
    #: document, cuBLAS `nvjet_..._176x128_64x5_...`; else `null`)
    #: (`profan.report.analysis.kernels`). `[]` for a GPU op none of whose kernels the trace
    #: holds; `null` in TPU and CPU reports and in reports written before it. Added within
    #: schema 3
    kernels: list[dict[str, Any]] | None = None
    #: reports built for the HTML page only (else `null`): the op's instruction as profan prints
    #: it (one line, attributes and metadata included). Added in schema 3
    hlo: str | None = None
    #: reports built for the HTML page only (else `null`): for a fusion, its fused computation
    #: printed (cut after 120 instructions, with a line saying how many more). Added in schema 3
    fused_body: str | None = None
    #: reports built for the HTML page only (else `[]`): the source stack from the module's
    #: stack-frame tables, innermost first, each `file:line in function`. Added in schema 3
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

    #: the rule's name (see `rules`)
    rule: str
    #: what the rule saw, in words
    message: str
    #: what to change or inspect
    look_at: str
    #: the op's `key`, or `null` for profile-wide findings
    op: str | None = None  # OpEntry.key
    #: the op's module
    module: str | None = None
    #: the op's name (or the buffer's, for memory rules)
    name: str | None = None
    #: `file:line` of the user code
    source: str | None = None
    #: time at stake: the op's or ops' measured time, all devices
    time_s: float = 0.0  # time at stake (the op's or ops' measured time, all devices)
    #: `straggler-host` findings only: the straggler's name
    host: str | None = field(default=None, metadata=OMIT_NONE)  # JSON: only when set
    # What fixing it would save (profan.report.rules.savings): time, all devices over the captured
    # steps, and that as a share of the devices' time; or bytes per device, and that as a share
    # of the chip's memory per device.  None where the rule cannot say; ``saving_from`` says how
    # the figure was estimated.
    #: seconds, all devices over the captured steps, as op times are; `null` where the saving is
    #: not a time or is unknown (e.g. `cost-unknown`). Added in schema 3 (old reports: `null`)
    saving_s: float | None = None
    #: `saving_s` over the devices' time: `summary.busy_span_s` × `device_count`
    saving_share: float | None = None
    #: bytes per device (memory rules and `large-allgather`)
    saving_bytes: float | None = None
    #: `saving_bytes` over the chip's `hbm_capacity_bytes`
    saving_memory_share: float | None = None
    #: how the saving was estimated, in words: `its exposed time`, `measured − ideal`, …
    saving_from: str | None = None
