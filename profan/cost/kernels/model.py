"""What a kernel cost model reads (``KernelCall``) and returns (``KernelCost``), and the helpers
every model shares: result arrays less scratch buffers, operand and result bytes."""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from profan.cost.bytes import xla_shape_size
from profan.hlo.model import Shape

# Where a figure comes from (issue 10): the HLO's own structure, the call's backend config, the
# kernel author's cost estimate, the trace's stats, a reading of the shapes, a lower bound, or
# nothing at all.
Source = Literal[
    "hlo",
    "backend-config",
    "cost-estimate",
    "trace",
    "shape-signature",
    "upper-bound",
    "lower-bound",
    "unknown",
]
SOURCES: tuple[str, ...] = typing.get_args(Source)
SOURCE_MEANINGS: dict[str, str] = {
    "hlo": "from the HLO: the op's shapes and attributes",
    "backend-config": "from the call's backend config (dimension numbers, attention sizes)",
    "cost-estimate": "the kernel author's cost estimate in the backend config",
    "trace": "the profiler's own per-op figure",
    "shape-signature": "read from the operand shapes (a matmul or attention by its shapes)",
    "upper-bound": "an upper bound: a fusion seen without its body is charged every operand "
    "and result in full; an attention kernel's block mask (operand data) counted full",
    "lower-bound": "a lower bound (operands plus results; attention with an unknown mask)",
    "unknown": "not known: no model for this kernel",
}
# Weakest last: a sum over ops is only as good as its weakest part.
_SOURCE_RANK = {
    "hlo": 0, "backend-config": 1, "cost-estimate": 2, "shape-signature": 3, "trace": 4,
    "upper-bound": 5, "lower-bound": 6, "unknown": 7,
}  # fmt: skip
ParamValue = str | int | float | bool
Params = dict[str, ParamValue]


@dataclass(slots=True)
class KernelCall:
    """What a cost model may know about one custom call (all from its HLO line)."""

    target: str
    operands: list[Shape | None]
    result: Shape
    config: dict[str, Any] = field(default_factory=dict)  # decoded backend_config
    attributes: dict[str, str] = field(default_factory=dict)  # raw HLO attributes
    name: str = ""  # kernel name where the call carries one (Triton ``name``, op_name, ...)


@dataclass(slots=True)
class KernelCost:
    """FLOPs and bytes of one call, with where each figure came from."""

    flops: float | None
    transcendentals: float | None
    bytes_read: float
    bytes_written: float
    flops_source: str
    bytes_source: str
    dtype: str | None = None  # operand element type of the math (drives the peak)
    precision: tuple[str, ...] = ()  # operand precisions (DEFAULT / HIGH / HIGHEST)
    algorithm: str | None = None  # dot algorithm, when the config names one
    model: str = "opaque"
    # the FLOPs are matrix-unit work (gemm, convolution, attention), measured against the
    # chip's matrix peak for the dtype and precision; elementwise-like kernels are not
    matrix_math: bool = False
    rule: str = ""  # the registry entry that matched ("" = none)
    # "start" | "done": the call marks one half of an asynchronous pair (XLA TPU's
    # AsyncCollectiveStart/Done inside an async-collective fusion)
    async_role: str | None = None
    derivation: list[str] = field(default_factory=list)

    @property
    def unknown(self) -> bool:
        return self.flops is None


def arrays(shape: Shape | None) -> list[Shape]:
    """The array leaves of a shape (none for ``None``)."""
    return [leaf for leaf in shape.leaves() if leaf.is_array] if shape is not None else []


def result_arrays(call: KernelCall, params: Params) -> list[Shape]:
    """The call's result arrays, less a trailing u8/s8 scratch buffer when the kernel has one
    (library calls return ``(result, workspace)``; the workspace is not data)."""
    leaves = arrays(call.result)
    if params.get("workspace", False) and len(leaves) > 1 and leaves[-1].dtype in ("u8", "s8"):
        leaves = leaves[:-1]
    return leaves


def io_bytes(call: KernelCall, params: Params) -> tuple[float, float]:
    """Bytes of the operands read and the results written (arrays outside HBM cost none)."""
    read = sum(xla_shape_size(leaf) for shape in call.operands for leaf in arrays(shape))
    written = sum(xla_shape_size(leaf) for leaf in result_arrays(call, params))
    return float(read), float(written)


def new_cost(call: KernelCall, params: Params, model: str, bytes_source: str) -> KernelCost:
    """A cost with the call's operand and result bytes and its first operand's dtype; FLOPs
    unknown until the model fills them in."""
    read, written = io_bytes(call, params)
    first = next((leaf for s in call.operands for leaf in arrays(s)), None)
    dtype = first.dtype if first is not None else None
    return KernelCost(None, None, read, written, "unknown", bytes_source, dtype=dtype, model=model)


def ints(values: Any) -> list[int]:
    """A JSON list of (possibly quoted) integers as ints."""
    return [int(value) for value in values or []]


def config_section(call: KernelCall, params: Params) -> dict[str, Any]:
    """The backend config's ``params.config`` section (the whole config without one)."""
    key = str(params.get("config", ""))
    value = call.config.get(key) if key else call.config
    return value if isinstance(value, dict) else {}


def weaker_source(first: str, second: str) -> str:
    """The less certain of two sources (what a sum of figures from both can claim)."""
    return max(first, second, key=lambda source: _SOURCE_RANK.get(source, len(_SOURCE_RANK)))


def reconcile(
    model_value: float | None,
    model_source: str,
    trace_value: float | None,
    *,
    what: str = "FLOPs",
) -> tuple[float | None, str, str | None]:
    """The figure to use, given the model's and the trace's, with its source and a note.

    The trace fills a figure the model does not know, raises a lower bound and lowers an upper
    bound; it never goes below the op's own lower bound (so an op with operands never gets 0
    bytes from a trace) nor above its upper bound; against a modelled figure it is only
    reported, when the two are more than 2x apart.
    """
    if trace_value is None or math.isnan(trace_value):
        return model_value, model_source, None
    if model_value is None or model_source == "unknown":
        return trace_value, "trace", None
    if trace_value == model_value:  # 0 and 0 included: the two agree
        return model_value, model_source, None
    if model_source == "lower-bound":
        if trace_value >= model_value:
            return trace_value, "trace", None
        return (
            model_value,
            model_source,
            (
                f"the trace's {what} ({trace_value:.4g}) are below the op's own lower bound "
                f"({model_value:.4g}): not used"
            ),
        )
    if model_source == "upper-bound":
        if trace_value <= model_value:
            return trace_value, "trace", None
        return (
            model_value,
            model_source,
            (
                f"the trace's {what} ({trace_value:.4g}) are above the op's upper bound "
                f"({model_value:.4g}): not used"
            ),
        )
    ratio = trace_value / model_value if model_value else math.inf
    if not 0.5 <= ratio <= 2.0:
        return (
            model_value,
            model_source,
            (
                f"{what}: the model says {model_value:.4g} ({model_source}), the trace "
                f"{trace_value:.4g}: more than 2x apart"
            ),
        )
    return model_value, model_source, None
