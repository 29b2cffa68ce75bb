"""The GEMM table (JSON ``gemms``): the report's matmul ops grouped by shape and dtype.

One row per (M, N, K, batch, lhs/rhs/out dtype, transposes) over the ops that run a matrix
multiply: a ``dot``, a fusion around one (XLA's Triton ``gemm_fusion_*``, ``fusion`` on TPU),
and library gemm custom calls (cuBLAS, cuBLASLt, hipBLASLt).  Sizes come from the HLO: a
dot's dimension numbers (``hlo_checks.matmul_dims``, the sizes the rules read) or the gemm
backend config's ``dot_dimension_numbers`` (where the cost model reads a library gemm's).

A row's FLOPs are the cost model's for the matmul itself (``CostModel.estimate`` of the custom
call or the dot: for a fusion, its dot alone; ``op_flops`` is the ops' whole FLOPs, the fused
elementwise work included) times the executions; its time is the ops' measured time; its peak
is the FLOP/s peak the roofline's compute term used for each op (the op's dtype and precision,
``OpEntry.peak``), so ``efficiency`` = the matmul's FLOPs at that peak / the measured time.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profan.cost import CostModel
from profan.hlo.model import Instruction, Module, Shape
from profan.hlo.views import backend_config
from profan.report.model import GemmEntry, GemmKernel, OpEntry
from profan.report.rules.hlo_checks import (
    DotDimensions,
    dot_dimensions,
    find_dot,
    matmul_dims,
    matmul_sizes,
    operand_shape,
)

_GEMM_TARGETS = ("cublas", "gemm", "hipblas")


@dataclass(frozen=True, slots=True)
class GemmShape:
    """What one GEMM row groups by."""

    m: int  # lhs non-contracting size
    n: int  # rhs non-contracting size
    k: int  # contracting size
    batch: int  # product of the batch dimensions (1 without)
    lhs_dtype: str
    rhs_dtype: str
    out_dtype: str
    # "N"/"T" per operand as the layouts store them (BLAS's sense: lhs M x K row-major is N,
    # rhs K x N row-major is N), None where an operand has more than one free or contracting
    # dimension
    transpose: str | None
    source: str  # "dot" | "backend-config"


@dataclass(slots=True)
class GemmRow:
    shape: GemmShape
    executions: int = 0
    time_s: float = 0.0
    flops: float = 0.0  # the matmuls' (cost model), all executions
    op_flops: float = 0.0  # the ops' whole FLOPs (a fusion's elementwise work too)
    t_compute_s: float = 0.0  # the matmuls' FLOPs at the peak each op's compute term used
    ops: list[str] = field(default_factory=list)  # labels, heaviest first
    peaks: list[str] = field(default_factory=list)  # the FLOP/s peaks the ops' compute used
    # kernel name -> [count, seconds] (GPU: the ops' kernels, ``OpEntry.kernels``)
    kernels: dict[str, list[Any]] = field(default_factory=dict)

    def entry(self) -> GemmEntry:
        """The row as the report holds it (JSON ``gemms[]``)."""
        shape = self.shape
        return GemmEntry(
            m=shape.m,
            n=shape.n,
            k=shape.k,
            batch=shape.batch,
            lhs_dtype=shape.lhs_dtype,
            rhs_dtype=shape.rhs_dtype,
            out_dtype=shape.out_dtype,
            transpose=shape.transpose,
            dims_from=shape.source,
            executions=self.executions,
            time_s=self.time_s,
            flops=self.flops,
            op_flops=self.op_flops,
            achieved_flops_per_s=self.flops / self.time_s if self.time_s > 0 else None,
            peak="/".join(self.peaks) or None,
            peak_flops_per_s=self.flops / self.t_compute_s if self.t_compute_s > 0 else None,
            efficiency=self.t_compute_s / self.time_s if self.time_s > 0 else None,
            ops=self.ops,
            kernels=[
                GemmKernel(name, count, time_s)
                for name, (count, time_s) in sorted(
                    self.kernels.items(), key=lambda item: -item[1][1]
                )
            ],
        )


def _free_and_contracting(
    shape: Shape, contracting: list[int], batch: list[int]
) -> tuple[int, int] | None:
    """The one free and one contracting dimension of a matmul operand, or None."""
    free = [d for d in range(shape.rank) if d not in contracting and d not in batch]
    if len(free) != 1 or len(contracting) != 1:
        return None
    return free[0], contracting[0]


def _minor(shape: Shape, first: int, second: int) -> int:
    """Which of two dimensions the layout stores faster-varying (default: the later one)."""
    order = shape.layout.minor_to_major if shape.layout is not None else ()
    if first in order and second in order:
        return first if order.index(first) < order.index(second) else second
    return max(first, second)


def _transpose(lhs: Shape, rhs: Shape, dims: DotDimensions) -> str | None:
    lhs_c, rhs_c, lhs_b, rhs_b = dims
    left = _free_and_contracting(lhs, lhs_c, lhs_b)
    right = _free_and_contracting(rhs, rhs_c, rhs_b)
    if left is None or right is None:
        return None
    lhs_word = "N" if _minor(lhs, *left) == left[1] else "T"  # K contiguous: M x K row-major
    rhs_word = "N" if _minor(rhs, *right) == right[0] else "T"  # N contiguous: K x N row-major
    return lhs_word + rhs_word


def _ints(values: Any) -> list[int]:
    return [int(value) for value in values or []]


def _result(instruction: Instruction) -> Shape:
    leaves = [leaf for leaf in instruction.shape.leaves() if leaf.is_array]
    return leaves[0] if leaves else instruction.shape


def gemm_of(
    instruction: Instruction, module: Module | None
) -> tuple[GemmShape, Instruction] | None:
    """The GEMM an op runs, from its HLO, and the instruction that is the matmul (the op, or
    the dot its fusion calls); None when it runs none."""
    if instruction.opcode == "custom-call":
        target = instruction.attributes.get("custom_call_target", "").lower()
        if not any(word in target for word in _GEMM_TARGETS):
            return None
        config = (backend_config(instruction) or {}).get("gemm_backend_config")
        numbers = config.get("dot_dimension_numbers") if isinstance(config, dict) else None
        lhs, rhs = operand_shape(module, instruction, 0), operand_shape(module, instruction, 1)
        if not isinstance(numbers, dict) or lhs is None or rhs is None:
            return None
        dims = (
            _ints(numbers.get("lhs_contracting_dimensions")),
            _ints(numbers.get("rhs_contracting_dimensions")),
            _ints(numbers.get("lhs_batch_dimensions")),
            _ints(numbers.get("rhs_batch_dimensions")),
        )
        shape = _shape(lhs, rhs, _result(instruction), dims, "backend-config")
        return None if shape is None else (shape, instruction)
    found = find_dot(instruction, module)
    if found is None or found[0].opcode != "dot":
        return None
    dot = found[0]
    sizes = matmul_dims(dot, module)
    lhs, rhs = operand_shape(module, dot, 0), operand_shape(module, dot, 1)
    if sizes is None or lhs is None or rhs is None:
        return None
    shape = _shape(lhs, rhs, dot.shape, dot_dimensions(dot), "dot")
    return None if shape is None else (shape, dot)


def _shape(
    lhs: Shape,
    rhs: Shape,
    out: Shape,
    dims: DotDimensions,
    source: str,
) -> GemmShape | None:
    if not (lhs.is_array and rhs.is_array):
        return None
    batch, m, n, k = matmul_sizes(lhs, rhs, dims)
    return GemmShape(
        m=m,
        n=n,
        k=k,
        batch=batch,
        lhs_dtype=lhs.dtype,
        rhs_dtype=rhs.dtype,
        out_dtype=out.dtype,
        transpose=_transpose(lhs, rhs, dims),
        source=source,
    )


def gemm_rows(ops: list[tuple[OpEntry, Instruction | None, Module | None]]) -> list[GemmRow]:
    """The GEMM table of a report's ops (each with its instruction and module), heaviest
    first."""
    rows: dict[GemmShape, GemmRow] = {}
    models: dict[int, CostModel] = {}
    for entry, instruction, module in ops:
        if instruction is None or module is None or entry.occurrences <= 0:
            continue
        found = gemm_of(instruction, module)
        if found is None:
            continue
        shape, matmul = found
        model = models.setdefault(id(module), CostModel(module))
        flops = model.estimate(matmul).flops
        if flops is None or entry.flops <= 0 or entry.t_compute_s <= 0:
            continue  # no FLOPs, or no peak to hold them to
        peak_flops_per_s = entry.flops / entry.t_compute_s
        row = rows.setdefault(shape, GemmRow(shape))
        row.executions += entry.occurrences
        row.time_s += entry.measured_s
        row.flops += flops * entry.occurrences
        row.op_flops += entry.flops
        row.t_compute_s += flops * entry.occurrences / peak_flops_per_s
        row.ops.append(entry.label)
        if entry.peak and entry.peak not in row.peaks:
            row.peaks.append(entry.peak)
        for kernel in entry.kernels or []:
            total = row.kernels.setdefault(kernel["name"], [0, 0.0])
            total[0] += kernel["count"]
            total[1] += kernel["time_s"]
    return sorted(rows.values(), key=lambda row: -row.time_s)


# The table's columns as every renderer shows them (``gemm_cells``).
GEMM_COLUMNS = ("M×N×K", "batch", "lhs,rhs→out", "layout", "n", "time", "FLOP/s", "eff", "kernel")


def gemm_cells(row: GemmEntry, kernel_width: int = 60) -> list[str]:
    """One GEMM row as text cells, in ``GEMM_COLUMNS`` order (the heaviest kernel, cut to
    ``kernel_width``, with ``+N`` for the others)."""
    from profan.report.analysis.kernels import short_name
    from profan.units import percent, seconds, si

    kernel = ""
    if row.kernels:
        kernel = short_name(str(row.kernels[0].name), kernel_width)
        kernel += f" +{len(row.kernels) - 1}" if len(row.kernels) > 1 else ""
    peak = f" of {row.peak}" if row.peak else ""
    return [
        f"{row.m}×{row.n}×{row.k}",
        str(row.batch),
        f"{row.lhs_dtype},{row.rhs_dtype}→{row.out_dtype}",
        row.transpose or "-",
        str(row.executions),
        seconds(row.time_s),
        si(row.achieved_flops_per_s, "FLOP/s"),
        percent(row.efficiency) + peak,
        kernel,
    ]
