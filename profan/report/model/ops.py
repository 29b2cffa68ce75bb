"""The report object: what ``profan report`` shows, as plain data.

Every renderer (terminal, Markdown, HTML, JSON), ``profan check`` and ``profan diff`` read this
one object, so the numbers they print are the same numbers.  ``Report.to_dict()`` is the JSON
report (schema in ``SCHEMA.md``); ``Report.from_dict()`` reads one back (baselines, diffs).
``profan.report.analysis.build`` makes a Report from a scored profile.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from profan.errors import ConfigError
from profan.report.slices import Timeline
from profan.version import __version__

SCHEMA_VERSION = 3
# Older versions this profan still reads (baselines written before a field changed meaning).
READABLE_SCHEMA_VERSIONS = (1, 2, 3)

Scalar = int | float | str | bool


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


@dataclass(frozen=True, slots=True)
class Device:
    """The accelerator as the trace describes it (JSON ``device``)."""

    kind: str = ""  # TPU, GPU, CPU
    type: str | None = None  # the device's own name: "TPU v6 Lite", "NVIDIA H100 80GB HBM3"
    count: int = 0  # devices seen across all hosts
    hosts: list[str] = field(default_factory=list)
    peak_flops_per_s: float | None = None  # the trace's own figures, where it has them
    peak_hbm_bytes_per_s: float | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Device:
        return cls(**{k: v for k, v in data.items() if k in _DEVICE_FIELDS})


_DEVICE_FIELDS = frozenset(item.name for item in dataclasses.fields(Device))


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
    host: str | None = None  # the host a cross-host finding names (JSON: only when set)
    # What fixing it would save (profan.report.rules.savings): time, all devices over the captured
    # steps, and that as a share of the devices' time; or bytes per device, and that as a share
    # of the chip's memory per device.  None where the rule cannot say; ``saving_from`` says how
    # the figure was estimated.
    saving_s: float | None = None
    saving_share: float | None = None
    saving_bytes: float | None = None
    saving_memory_share: float | None = None
    saving_from: str | None = None


@dataclass(frozen=True, slots=True)
class IdleGap:
    """A hole in one device's timeline between two ops."""

    device: int
    start_s: float
    duration_s: float


# The scorer's summary figures are copied into the JSON summary under this prefix.
SCORER_PREFIX = "score_"


@dataclass(slots=True)
class Summary:
    """Whole-profile figures (JSON ``summary``; SCHEMA.md says what each one means)."""

    step_count: int = 0
    step_time_median_s: float | None = None
    step_time_min_s: float | None = None
    step_time_max_s: float | None = None
    step_time_p10_s: float | None = None
    step_time_p90_s: float | None = None
    mfu: float | None = None
    total_op_time_s: float = 0.0
    matched_op_time_s: float = 0.0
    unmatched_op_time_s: float = 0.0
    op_count: int = 0
    device_count: int = 1
    time_by_category_s: dict[str, float] = field(default_factory=dict)  # per device
    time_by_bound_s: dict[str, float] = field(default_factory=dict)  # per device, with idle
    collective_time_s: float = 0.0  # per device
    exposed_comm_s: float = 0.0  # per device
    exposed_comm_per_step_s: float | None = None
    exposed_comm_share: float = 0.0
    busy_span_s: float = 0.0  # per device
    idle_s: float = 0.0  # per device
    idle_gaps: list[IdleGap] = field(default_factory=list)
    inter_step_gap_total_s: float = 0.0
    inter_step_gap_max_s: float = 0.0
    ideal_time_s: float = 0.0  # per device
    # the scorer's own scalar figures, verbatim (JSON: ``score_<name>``)
    scorer: dict[str, Scalar] = field(default_factory=dict)
    mesh: dict[str, dict[str, int]] = field(default_factory=dict)  # module key -> axis sizes
    findings: int | None = None  # None until the rules ran

    @property
    def step_ideal_s(self) -> float | None:
        """The scorer's ideal step (mean over steps), per device."""
        return _optional_number(self.scorer.get("step_ideal_s"))

    @property
    def step_measured_s(self) -> float | None:
        return _optional_number(self.scorer.get("step_measured_s"))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in ("scorer", "mesh", "findings"):
                continue
            value = getattr(self, f.name)
            out[f.name] = [dataclasses.asdict(g) for g in value] if f.name == "idle_gaps" else value
        out.update({SCORER_PREFIX + name: value for name, value in self.scorer.items()})
        out["mesh"] = self.mesh
        if self.findings is not None:
            out["findings"] = self.findings
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Summary:
        known = {f.name for f in dataclasses.fields(cls)} - {"scorer", "idle_gaps"}
        values = {k: v for k, v in data.items() if k in known}
        values["idle_gaps"] = [IdleGap(**g) for g in data.get("idle_gaps", [])]
        values["scorer"] = {
            k.removeprefix(SCORER_PREFIX): v for k, v in data.items() if k.startswith(SCORER_PREFIX)
        }
        return cls(**values)


def _optional_number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


@dataclass(slots=True)
class Report:
    device: Device
    chip: dict[str, Any]
    steps: list[dict[str, Any]]
    summary: Summary
    ops: list[OpEntry]
    findings: list[Finding]
    unmatched: list[dict[str, Any]]
    trace: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # One entry per program and memory space (profan.report.analysis.memory; SCHEMA.md "memory").
    memory: list[dict[str, Any]] = field(default_factory=list)
    # The cross-host view (profan.report.analysis.hosts; SCHEMA.md "hosts"), empty for one host.
    hosts: list[dict[str, Any]] = field(default_factory=list)
    cross_host: dict[str, Any] = field(default_factory=dict)
    # Every rule, what it checks and the thresholds it used
    # (profan.report.rules.catalogue.rule_table).
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Every step's op slices per device, for the HTML page's timeline (profan.report.page);
    # None unless the report was built for the page.
    timeline: Timeline | None = None
    # The matmul ops by shape and dtype (profan.report.analysis.gemms; SCHEMA.md "gemms").
    gemms: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        extra: dict[str, Any] = (
            {"hosts": self.hosts, "cross_host": self.cross_host} if self.hosts else {}
        )
        if self.timeline is not None:
            extra["timeline"] = self.timeline.to_dict()
        return _clean_dict(
            {
                "schema_version": self.schema_version,
                "tool": {"name": "profan", "version": __version__},
                "trace": self.trace,
                "device": dataclasses.asdict(self.device),
                "chip": self.chip,
                "steps": self.steps,
                "summary": self.summary.to_dict(),
                # each op's fields as they are: _clean copies their lists and dicts (asdict's
                # deep copy of every value, then _clean's, cost twice as much)
                "ops": [{name: getattr(op, name) for name in _OP_FIELDS} for op in self.ops],
                "findings": [_finding_dict(f) for f in self.findings],
                "unmatched": self.unmatched,
                "memory": self.memory,
                "rules": self.rules,
                "gemms": self.gemms,
                **extra,
            }
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, where: str = "report") -> Report:
        if not isinstance(data, dict) or "schema_version" not in data:
            raise ConfigError(f"{where}: not a profan JSON report (no schema_version)")
        if data["schema_version"] not in READABLE_SCHEMA_VERSIONS:
            readable = ", ".join(str(v) for v in READABLE_SCHEMA_VERSIONS)
            raise ConfigError(
                f"{where}: schema_version {data['schema_version']} is not supported "
                f"(this profan reads {readable})"
            )
        try:
            op_fields = {f.name for f in dataclasses.fields(OpEntry)}
            ops = [OpEntry(**{k: v for k, v in op.items() if k in op_fields}) for op in data["ops"]]
            finding_fields = {f.name for f in dataclasses.fields(Finding)}
            findings = [
                Finding(**{k: v for k, v in f.items() if k in finding_fields})
                for f in data.get("findings", [])
            ]
            return cls(
                device=Device.from_dict(dict(data["device"])),
                chip=dict(data["chip"]),
                steps=list(data["steps"]),
                summary=Summary.from_dict(dict(data["summary"])),
                ops=ops,
                findings=findings,
                unmatched=list(data.get("unmatched", [])),
                trace=dict(data.get("trace", {})),
                schema_version=int(data["schema_version"]),
                memory=list(data.get("memory", [])),
                hosts=list(data.get("hosts", [])),
                cross_host=dict(data.get("cross_host", {})),
                rules=dict(data.get("rules", {})),
                gemms=list(data.get("gemms", [])),
                timeline=Timeline.from_dict(data["timeline"]) if data.get("timeline") else None,
            )
        except (KeyError, TypeError) as error:
            raise ConfigError(f"{where}: malformed profan JSON report ({error})") from None

    def op(self, key: str) -> OpEntry | None:
        for entry in self.ops:
            if entry.key == key:
                return entry
        return None


_OP_FIELDS = tuple(item.name for item in dataclasses.fields(OpEntry))


def _finding_dict(finding: Finding) -> dict[str, Any]:
    data = dataclasses.asdict(finding)
    if data.get("host") is None:
        data.pop("host", None)  # only cross-host findings name a host
    return data


def _clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return _clean_dict(value)
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    kind = type(value)
    if kind is float:
        return value if math.isfinite(value) else None
    if value is None or kind is str or kind is int or kind is bool:
        return value
    return _clean_scalar(value)


def _clean_dict(value: dict[Any, Any]) -> dict[str, Any]:
    return {str(k): _clean(v) for k, v in value.items()}


def _clean_scalar(value: Any) -> Any:
    """A numpy or pandas scalar (numpy and pandas are loaded when one exists: imported here, so
    that reading a report back never imports them), or a dataclass (its fields)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _clean(dataclasses.asdict(value))
    import numpy as np
    import pandas as pd

    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is pd.NA or value is pd.NaT:
        return None
    return value
