"""The report's smaller sections, as plain dataclasses: the tool and the trace it read, the chip
it scored against, the steps, the unmatched events, the rules and the GEMM table.

Each is one JSON object (or array of them) of SCHEMA.md; ``profan.report.model.codec`` writes
and reads them from their fields.  The ``#:`` comment of a field is its line in SCHEMA.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from profan.report.model.codec import INLINE, OMIT_NONE
from profan.version import __version__


@dataclass(frozen=True, slots=True)
class Tool:
    """What wrote the report (JSON ``tool``)."""

    #: `profan`
    name: str = "profan"
    #: profan's version
    version: str = __version__


@dataclass(slots=True)
class CaptureInfo:
    """How a ``profan.capture`` ran (JSON ``trace.capture``)."""

    #: name of the captured function
    function: str
    #: steps asked for
    steps: int
    #: untraced warm-up calls
    warmup: int
    #: steps the profiler recorded
    traced_steps: int = 0
    #: XLA compilations while the profiler recorded; more than 0 means the steps' times include
    #: compiling (and a program that recompiles every step is itself a performance bug)
    compilations_in_trace: int = 0
    #: host wall time of each traced step
    step_wall_s: list[float] = field(default_factory=list)
    #: the last traced step's ideal time is below every earlier step's, i.e. its device work was
    #: still running when the trace stopped (its outputs were dropped, not waited for); capture
    #: warns and the pytest plugin fails `capture.complete`
    last_step_cut_short: bool = False
    #: whether the trace was kept
    trace_kept: bool = False


@dataclass(slots=True)
class Trace:
    """The trace the report was made from (JSON ``trace``)."""

    #: the trace the report was made from; for `profan.capture`, the kept directory or
    #: `"<profan.capture of NAME; trace not kept>"`
    path: str = ""
    #: the profiler run read (the run directory's name under `plugins/profile/`), or `null`
    run: str | None = None
    #: how the trace was read, each once, in the order written: where the measured side came
    #: from (TPU op times from the device's own clock), which rule joined a CUDA-graph kernel
    #: whose sanitized name fits two instructions, the HLO taken from the `.xplane.pb` beside a
    #: trace-viewer JSON, how steps were found. The text formats list the first 10 and count the
    #: rest. Added within schema 3 (absent from older reports)
    notes: list[str] = field(default_factory=list)
    #: where the trace holds fewer devices than its programs' meshes span (one host of several):
    #: words saying so (per-device figures are of the devices it holds); absent otherwise
    devices_partial: str | None = field(default=None, metadata=OMIT_NONE)
    #: only when no op was joined to HLO (a trace-viewer JSON given alone with no `.xplane.pb`
    #: of its run beside it, or a GPU one): one line saying so and what to pass (`--hlo DIR` or
    #: the run's `.xplane.pb`); `summary.mfu` is then `null`, only findings that need no HLO
    #: (`idle-gaps`, `straggler-host`) are kept, and `profan check` fails an MFU gate
    hlo_missing: str | None = field(default=None, metadata=OMIT_NONE)
    #: reports made by `profan.capture` (Python API, pytest plugin) only: how it ran
    capture: CaptureInfo | None = field(default=None, metadata=OMIT_NONE)


@dataclass(slots=True)
class ChipSection:
    """The catalogue entry the profile was scored against (``profan/data/chips.toml``: every
    scalar and table field of ``profan.chips.Chip``, in its order), then the per-device figures
    the report used (JSON ``chip``)."""

    #: catalogue key, e.g. `tpu-v5e`
    name: str = ""
    #: the chip's name as people write it
    display_name: str = ""
    #: `TPU`, `GPU` or `CPU`
    kind: str = ""
    #: dtype → dense FLOP/s per chip
    peak_flops: dict[str, float] = field(default_factory=dict)
    #: memory per chip, bytes
    hbm_bytes: float = 0.0
    #: memory bandwidth per chip
    hbm_bytes_per_s: float = 0.0
    #: one interconnect link, one direction
    ici_link_bytes_per_s_uni: float = 0.0
    #: one interconnect link, both directions
    ici_link_bytes_per_s_bi: float = 0.0
    #: interconnect links per chip
    ici_links: int = 0
    #: `torus2d`, `torus3d`, `switched`, …
    topology: str = ""
    #: latency of one interconnect hop, seconds
    ici_hop_latency_s: float = 0.0
    #: data-centre network bandwidth per chip
    dcn_bytes_per_s: float = 0.0
    #: host link (PCIe) bandwidth per chip
    pcie_bytes_per_s: float = 0.0
    #: which rings have their wraparound link: `never`, `always`, `axis-16`, `cube-4`
    wraparound: str = "never"
    #: transcendentals (exp, log, tanh, …) per second per chip; `null` when unknown
    transcendentals_per_s: float | None = None
    #: devices (trace planes) per chip
    devices_per_chip: int = 1
    #: TensorCores per chip
    tensorcores_per_chip: int = 1
    #: TensorCores acting as one device (TPU v4, v5p)
    megacore: bool = False
    #: the matrix unit's size (`null` when the catalogue has none)
    mxu_size: int | None = None
    #: the chip's maker, where the catalogue names it
    vendor: str | None = None
    #: whether the figures are estimates
    approximate: bool = False
    #: catalogue field → its citation
    sources: dict[str, str] = field(default_factory=dict)
    #: where each figure used for scoring came from: `catalogue` or `trace` (and
    #: `transcendentals_per_s`: `unknown` when the catalogue has no rate)
    figure_sources: dict[str, str] = field(default_factory=dict)
    #: bf16 dense FLOP/s per device
    peak_flops_per_s: float | None = None
    #: memory per device, bytes
    hbm_capacity_bytes: float | None = None
    #: `trace` when the trace's own peak figures were used, else `catalogue`
    source: str = "catalogue"
    #: memory bandwidth per device
    hbm_bytes_per_s_device: float | None = None
    #: transcendentals per second per device; `null` when the catalogue has no rate for the chip
    #: (`figure_sources.transcendentals_per_s` is then `"unknown"` and no op's transcendentals
    #: are timed)
    transcendentals_per_s_device: float | None = None


@dataclass(slots=True)
class StepScore:
    """The scorer's columns of one step (``profan.roofline.steps``), per device unless said."""

    #: the busiest device's ideal
    ideal_s: float | None = None
    #: `ideal_s / measured_s`, at most 1
    efficiency: float | None = None
    #: the step's model FLOPs utilisation (see `summary.mfu`)
    mfu: float | None = None
    #: the step's FLOPs, all devices
    model_flops: float | None = None
    #: share of the step's op time (summed over its devices) bound by compute
    share_compute: float | None = None
    #: share of the step's op time bound by HBM
    share_hbm: float | None = None
    #: share of the step's op time bound by the interconnect
    share_ici: float | None = None
    #: share of the step's op time bound by the host link
    share_host: float | None = None
    #: share of the step's op time bound by the transcendental unit
    share_transcendental: float | None = None
    #: share of the step's op time whose bound is unknown
    share_unknown: float | None = None
    #: the step's `measured_s` split as `summary.time_by_bound_s` splits the busy span (each
    #: instant shared evenly by the ops running then; mean over the step's devices): time of
    #: compute-bound ops
    time_compute_s: float | None = None
    #: the same for HBM-bound ops
    time_hbm_s: float | None = None
    #: the same for interconnect-bound ops
    time_ici_s: float | None = None
    #: the same for host-link-bound ops
    time_host_s: float | None = None
    #: the same for transcendental-bound ops
    time_transcendental_s: float | None = None
    #: the same for ops of unknown bound
    time_unknown_s: float | None = None
    #: the time no op ran (with the `time_<bound>_s` it sums to `measured_s`)
    idle_s: float | None = None
    #: devices with ops in the step
    devices: int | None = None
    #: words, where an invariant needed an exception (ops past the window, executions faster
    #: than their roofline, overlap, a cap); else `null`
    note: str | None = None

    def times_s(self) -> dict[str, float | None]:
        """Bound → ``time_<bound>_s`` (as ``summary.time_by_bound_s`` names bounds)."""
        return {
            "compute": self.time_compute_s,
            "hbm": self.time_hbm_s,
            "ici": self.time_ici_s,
            "host": self.time_host_s,
            "transcendental": self.time_transcendental_s,
            "unknown": self.time_unknown_s,
        }

    def shares(self) -> dict[str, float | None]:
        """Bound → ``share_<bound>``."""
        return {
            "compute": self.share_compute,
            "hbm": self.share_hbm,
            "ici": self.share_ici,
            "host": self.share_host,
            "transcendental": self.share_transcendental,
            "unknown": self.share_unknown,
        }


@dataclass(slots=True)
class StepRow:
    """One step (JSON ``steps[]``): its window as the trace marks it, and the scorer's
    figures."""

    #: step number
    step: int
    #: seconds since the profile's first event
    start_s: float = 0.0
    #: seconds since the profile's first event
    end_s: float = 0.0
    #: what the ideal is compared with: the longest per-device span of the step's own ops, never
    #: less than `window_s` (ops of other programs may run past the window)
    measured_s: float = 0.0
    #: the step as the trace marks it, on the slowest device (`null` in schema 1 reports); the
    #: summary's `step_time_*` statistics are over it
    window_s: float | None = None
    #: the scorer's per-step columns, written among the step's own keys (absent for a step
    #: that ran no op)
    score: StepScore | None = field(default=None, metadata=INLINE)

    @property
    def note(self) -> str | None:
        return None if self.score is None else self.score.note


@dataclass(slots=True)
class UnmatchedGroup:
    """Op events that could not be joined to HLO, for one reason (JSON ``unmatched[]``)."""

    #: why they were not joined
    reason: str
    #: events
    count: int
    #: up to 5 op names
    examples: list[str] = field(default_factory=list)


RuleValue = float | list[str]


@dataclass(slots=True)
class RuleEntry:
    """One rule and the thresholds it used (JSON ``rules[name]``)."""

    #: what it checks
    summary: str
    #: `RuleConfig` field → value used (`[rules]` of `profan.toml`, defaults without one)
    thresholds: dict[str, RuleValue] = field(default_factory=dict)
    #: `RuleConfig` field → value used: below these a finding of the rule is not reported
    floors: dict[str, RuleValue] = field(default_factory=dict)
    #: whether the rule ran
    enabled: bool = True


@dataclass(slots=True)
class GemmKernel:
    """One kernel the ops of a GEMM row ran (GPU)."""

    #: the trace's event name
    name: str
    #: executions
    count: int
    #: seconds, all devices
    time_s: float


@dataclass(slots=True)
class GemmEntry:
    """The matmul ops of one shape and dtype (JSON ``gemms[]``)."""

    #: lhs non-contracting size
    m: int
    #: rhs non-contracting size
    n: int
    #: contracting size
    k: int
    #: product of the batch dimensions (1 without)
    batch: int
    #: lhs element type
    lhs_dtype: str
    #: rhs element type
    rhs_dtype: str
    #: output element type
    out_dtype: str
    #: `N`/`T` per operand as the layouts store them in BLAS's sense (lhs M×K row-major is `N`,
    #: rhs K×N row-major is `N`); `null` where an operand has more than one free or contracting
    #: dimension
    transpose: str | None
    #: where the sizes come from: `dot` (the dot's dimension numbers) or `backend-config` (the
    #: gemm backend config's `dot_dimension_numbers`)
    dims_from: str
    #: the listed ops' executions, all devices
    executions: int = 0
    #: the listed ops' measured time, all devices
    time_s: float = 0.0
    #: the cost model's FLOPs of the matmul itself over the executions (= 2·M·N·K·batch ×
    #: `executions`)
    flops: float = 0.0
    #: the ops' whole FLOPs (`ops[].flops`: a fusion's other work too)
    op_flops: float = 0.0
    #: `flops / time_s`
    achieved_flops_per_s: float | None = None
    #: the FLOP/s peak each op's compute term used (`ops[].peak`: `bf16`, `f32/tf32`, `fp8`, …)
    peak: str | None = None
    #: that peak, per device
    peak_flops_per_s: float | None = None
    #: the matmul's FLOPs at that peak / `time_s`
    efficiency: float | None = None
    #: the ops' `label`s, heaviest first
    ops: list[str] = field(default_factory=list)
    #: the kernels they ran (GPU, `ops[].kernels`), heaviest first
    kernels: list[GemmKernel] = field(default_factory=list)
